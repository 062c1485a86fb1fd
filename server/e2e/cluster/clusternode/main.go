// Command clusternode runs one process of the fault test's cluster
// (package cluster_test, TestClusterUnderFaults): one or more Temporal
// services, a NATS server, or an S3-protocol content store. It exists
// for that test only: it prints "ready" on stdout once it serves, and
// runs until killed or sent SIGTERM.
//
//	clusternode temporal -services history -postgres URL -ports JSON -shards 4
//	clusternode nats -port 4222
//	clusternode s3 -port 9000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/natsserver"
)

// Bucket is the bucket the s3 role serves.
const Bucket = "keel"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clusternode temporal|nats|s3 [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch role, args := os.Args[1], os.Args[2:]; role {
	case "temporal":
		err = runTemporal(ctx, args)
	case "nats":
		err = runNATS(ctx, args)
	case "s3":
		err = runS3(ctx, args)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusternode:", err)
		os.Exit(1)
	}
}

func runTemporal(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("temporal", flag.ExitOnError)
	services := fs.String("services", "", "comma-separated services to run")
	pgURL := fs.String("postgres", "", "PostgreSQL URL naming the executions database")
	ports := fs.String("ports", "", `JSON {"frontend":{"GRPC":7233,"Membership":6933},...}`)
	shards := fs.Int("shards", 1, "history shards")
	_ = fs.Parse(args)
	pg, err := devserver.ParsePostgresURL(*pgURL)
	if err != nil {
		return err
	}
	var p map[string]devserver.ServicePorts
	if err := json.Unmarshal([]byte(*ports), &p); err != nil {
		return fmt.Errorf("-ports: %w", err)
	}
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.AddSync(os.Stderr), zapcore.WarnLevel))
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(startCtx, devserver.Config{
		Postgres: pg,
		Logger:   logger,
		Cluster:  &devserver.Cluster{Services: strings.Split(*services, ","), Ports: p, HistoryShards: int32(*shards)},
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	return srv.Stop()
}

func runNATS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nats", flag.ExitOnError)
	port := fs.Int("port", 0, "port on 127.0.0.1")
	_ = fs.Parse(args)
	srv, err := natsserver.Start(natsserver.Options{Port: *port})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

// runS3 serves an S3-protocol store (gofakes3, in memory) holding Bucket.
// Its objects live as long as the process: the test never kills it, it
// only cuts it off.
func runS3(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("s3", flag.ExitOnError)
	port := fs.Int("port", 0, "port on 127.0.0.1")
	_ = fs.Parse(args)
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server(),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	fmt.Println("ready")
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
