package devserver

import (
	"errors"
	"testing"
)

func TestClusterConfig(t *testing.T) {
	ports := map[string]ServicePorts{
		"frontend": {7233, 6933}, "history": {7234, 6934}, "matching": {7235, 6935}, "worker": {7239, 6939},
	}
	pg := &Postgres{User: "keel"}
	for name, tc := range map[string]struct {
		cfg     Config
		wantErr bool
	}{
		"history alone":      {Config{Postgres: pg, Cluster: &Cluster{Services: []string{"history"}, Ports: ports, HistoryShards: 4}}, false},
		"without PostgreSQL": {Config{Cluster: &Cluster{Services: []string{"history"}, Ports: ports}}, true},
		"no services":        {Config{Postgres: pg, Cluster: &Cluster{Ports: ports}}, true},
		"unknown service":    {Config{Postgres: pg, Cluster: &Cluster{Services: []string{"frontdesk"}, Ports: ports}}, true},
		"a service's ports missing": {Config{Postgres: pg, Cluster: &Cluster{Services: []string{"history"},
			Ports: map[string]ServicePorts{"history": {7234, 6934}}}}, true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tc.cfg.withDefaults()
			if tc.wantErr {
				if !errors.Is(err, errClusterConfig) {
					t.Fatalf("withDefaults: %v, want errClusterConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Port != 7233 || !got.DisableUI {
				t.Errorf("Port %d, DisableUI %v; want the frontend's port 7233 and no UI", got.Port, got.DisableUI)
			}
			c, _, err := serverConfig(got, sqlStores{})
			if err != nil {
				t.Fatal(err)
			}
			if c.Persistence.NumHistoryShards != 4 || c.Services["matching"].RPC.MembershipPort != 6935 ||
				c.PublicClient.HostPort != "127.0.0.1:7233" {
				t.Errorf("server config: %d shards, matching's membership port %d, public client %s",
					c.Persistence.NumHistoryShards, c.Services["matching"].RPC.MembershipPort, c.PublicClient.HostPort)
			}
		})
	}
}
