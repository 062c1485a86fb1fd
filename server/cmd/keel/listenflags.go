package main

import "strings"

// hostsFlag is --allowed-host, of every command with an HTTP listener
// (keel dev, serve, worker's metrics, codec): the host names its
// listeners answer to besides their own address and, on loopback,
// localhost (internal/httpguard). Repeatable and comma-separated; each
// use adds to the list.
type hostsFlag struct{ items []string }

func (h *hostsFlag) register(fs *flagSet, which string) {
	fs.Var(h, "allowed-host", "host `NAME` (or IP address, no port) "+which+" answer to besides their own address and, on loopback, localhost: "+
		"the name a DNS record or a reverse proxy gives them (repeatable, or comma-separated); a request for any other Host gets 403")
}

func (h *hostsFlag) String() string { return strings.Join(h.items, ",") }

func (h *hostsFlag) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			h.items = append(h.items, item)
		}
	}
	return nil
}
