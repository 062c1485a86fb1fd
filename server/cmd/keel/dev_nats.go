//go:build !nodev

package main

import (
	"fmt"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/natsserver"
)

// startNATS starts the embedded NATS server, which takes keel dev's NKey
// user only, and records the seed for local commands.
func (s *devStack) startNATS(cfg devConfig) error {
	kp, seed, err := devNATSUser(cfg.dataDir)
	if err != nil {
		return err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("keel dev: NATS credentials: %w", err)
	}
	s.nats, err = natsserver.Start(natsserver.Options{Port: anyPortIfZero(cfg.natsPort, natsserver.RandomPort), NKeys: []string{pub}})
	if err != nil {
		return fmt.Errorf("%w\nIs another NATS server (or `keel dev`) using the port? Choose another with --nats-port (0 picks a free one)", err)
	}
	s.natsLogin = devNATSLogin{kp: kp, seed: seed}
	if cfg.dataDir != "" {
		s.natsLogin.seedFile = filepath.Join(cfg.dataDir, devNATSSeedFile)
	}
	s.natsLogin.entry, s.natsLogin.entryErr = registerDevNATS(s.nats.ClientURL(), seed, cfg.dataDir)
	return nil
}

// liveOptions are the options of keel dev's own live-channel connections:
// its NKey, and its keys when it encrypts.
func (s *devStack) liveOptions() live.NATSOptions {
	o := live.NATSOptions{Dial: []nats.Option{s.natsLogin.option()}}
	if s.keys != nil {
		o.Encryption = crypt.NewCodec(s.keys)
	}
	return o
}
