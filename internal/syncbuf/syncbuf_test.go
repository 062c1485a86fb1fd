package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers on several goroutines and a reader race-free (run with -race):
// every write arrives whole.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("ab\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); strings.Count(got, "ab\n") != 800 || len(got) != 2400 {
		t.Fatalf("%d bytes, %d whole writes; want 2400 and 800", len(got), strings.Count(got, "ab\n"))
	}
}
