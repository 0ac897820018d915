// Command temporald runs the dev Temporal server of package devtemporal
// as a process of its own: the end-to-end tests, cmd/chaos and
// cmd/idembench start it (through package temporalproc) so that their
// race-instrumented binaries never link the Temporal server.
//
//	temporald [-address 127.0.0.1:0] [-db-file PATH] [-namespace NS,...] [-v]
//
// It prints "listening ADDRESS" on stdout once the frontend accepts
// connections, and stops on SIGINT, SIGTERM or when its stdin closes (its
// parent went away).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/onceflow/onceflow/cmd/internal/devtemporal"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "temporald:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("temporald", flag.ContinueOnError)
	addr := fs.String("address", "127.0.0.1:0", "the frontend's host:port; port 0 picks a free one")
	db := fs.String("db-file", "", "the SQLite file to persist to; empty: in memory")
	ns := fs.String("namespace", devtemporal.DefaultNamespace, "the namespaces to register, comma-separated")
	verbose := fs.Bool("v", false, "print the server's errors on stderr (it reports many while it starts)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	srv, err := devtemporal.Start(devtemporal.Config{Address: *addr, DBFile: *db, Namespaces: strings.Split(*ns, ","), Logger: logger})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Printf("listening %s\n", srv.Address())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-sig:
	case <-eof:
	}
	return nil
}
