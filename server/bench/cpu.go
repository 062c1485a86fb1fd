package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ): 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// ProcessCPU returns the user and system CPU time a process has used so
// far, all its threads together; pid 0 is this process. It reads /proc,
// so it works on Linux only and reports an error elsewhere.
func ProcessCPU(pid int) (time.Duration, error) {
	name := "self"
	if pid != 0 {
		name = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return 0, fmt.Errorf("bench: CPU time of process %s: %w", name, err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime from a /proc/PID/stat line. The
// command name (field 2) may hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: unreadable /proc stat %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc stat %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
