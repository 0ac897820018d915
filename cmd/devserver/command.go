package devserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/onceflow/onceflow/cmd/cli"
)

// Command is the `dev-server` command of cmd/worker and of the order
// example's binary: it runs only the embedded Temporal dev server, as `temporal
// server start-dev` does, without installing the Temporal CLI:
//
//	worker dev-server [-address 127.0.0.1:7233] [-allow-remote] [-db-file PATH] [-namespace NS,...] [-v] [-exit-on-stdin-eof]
//
// It prints "listening ADDRESS" once the frontend accepts connections and
// runs until ctx is done (SIGINT, SIGTERM). The end-to-end tests, cmd/chaos
// and cmd/idembench start it as a process of their own (package
// temporalproc), with -exit-on-stdin-eof.
func Command(ctx context.Context, args []string, out io.Writer) error {
	fs := cli.NewFlagSet("dev-server")
	addr := fs.String("address", DefaultTemporalAddress, "the frontend's host:port, on loopback unless -allow-remote; port 0 picks a free one")
	remote := fs.Bool("allow-remote", false, "let -address be other than loopback: the server has no authentication, so anyone who reaches it drives every workflow")
	db := fs.String("db-file", "", "the SQLite file to keep the server's state in; empty: in memory, gone when it stops")
	ns := fs.String("namespace", DefaultNamespace, "the namespaces to register, comma-separated")
	verbose := fs.Bool("v", false, "print the server's warnings and errors on stderr (it reports many while it starts)")
	stdinEOF := fs.Bool("exit-on-stdin-eof", false, "stop when stdin closes: the parent that started it went away")
	if err := cli.Parse(fs, args, cli.Help{Out: out, Synopsis: "usage: worker dev-server [-address HOST:PORT] [-allow-remote] [-db-file PATH] [-namespace NS,...] [-v] [-exit-on-stdin-eof]\n\n" +
		"Runs only the embedded Temporal dev server, with the OnceflowPending search attribute registered; it prints \"listening ADDRESS\" once it accepts connections."}); err != nil {
		return err
	}
	if err := CheckListenAddress(*addr, *remote, "-allow-remote"); err != nil {
		return cli.Usagef("dev-server", "-address: %v", err)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	listening, stop, err := StartTemporal(*addr, *db, strings.Split(*ns, ","), logger)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := fmt.Fprintf(out, "listening %s\n", listening); err != nil {
		return err
	}
	eof := make(chan struct{})
	if *stdinEOF {
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	}
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}
