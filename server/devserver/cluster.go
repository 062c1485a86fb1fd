package devserver

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
)

// Cluster makes a Server one member of a Temporal cluster whose services
// run in processes of their own, as Temporal runs in production: each
// process starts the services Services names (temporal.ForServices) and
// finds the others through Temporal's own membership (ringpop, bootstrapped
// from the cluster_membership table of the shared database). Every process
// of one cluster is given the same Ports and HistoryShards.
type Cluster struct {
	// Services this process runs, among "frontend", "history", "matching"
	// and "worker". Required.
	Services []string
	// Ports of every service of the cluster: its gRPC port and its
	// membership (ringpop) port, on 127.0.0.1. Required: all four.
	// Config.Port is ignored; the frontend listens on Ports["frontend"].
	Ports map[string]ServicePorts
	// HistoryShards is the number of history shards. It is written to the
	// database on first start and must never change for it. Optional:
	// default 1.
	HistoryShards int32
}

// ServicePorts are one service's ports in a Cluster.
type ServicePorts struct {
	GRPC, Membership int
}

// clusterJoinTimeout bounds how long a service waits to join the ring:
// Temporal's default (10 s) is tight on a loaded machine.
const clusterJoinTimeout = 30 * time.Second

// clusterReadyPoll is how often a cluster's frontend is asked whether it
// is ready at start.
const clusterReadyPoll = 250 * time.Millisecond

var errClusterConfig = errors.New("devserver: bad Cluster")

func (c *Cluster) check() error {
	if len(c.Services) == 0 {
		return fmt.Errorf("%w: no Services", errClusterConfig)
	}
	for _, s := range c.Services {
		if !slices.Contains(temporal.DefaultServices, s) {
			return fmt.Errorf("%w: unknown service %q", errClusterConfig, s)
		}
	}
	for _, s := range temporal.DefaultServices {
		p, ok := c.Ports[s]
		if !ok || p.GRPC <= 0 || p.Membership <= 0 {
			return fmt.Errorf("%w: no ports for service %q", errClusterConfig, s)
		}
	}
	if c.HistoryShards < 0 {
		return fmt.Errorf("%w: negative HistoryShards", errClusterConfig)
	}
	return nil
}

// runs reports whether this process runs service.
func (c *Cluster) runs(service primitives.ServiceName) bool {
	return slices.Contains(c.Services, string(service))
}

// clusterServices is the services section of a cluster member's
// configuration: every service's ports, whichever this process runs.
func (c *Cluster) clusterServices() map[string]config.Service {
	const ip = "127.0.0.1"
	services := map[string]config.Service{}
	for name, p := range c.Ports {
		services[name] = config.Service{RPC: config.RPC{GRPCPort: p.GRPC, MembershipPort: p.Membership, BindOnIP: ip}}
	}
	return services
}

// frontendAddress is where clients and the other services reach the
// frontend.
func (c *Cluster) frontendAddress() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Ports[string(primitives.FrontendService)].GRPC))
}
