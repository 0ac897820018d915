package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/onceflow/onceflow/harness/childproc"
)

// EnvPostgresBin names the directory of PostgreSQL's server binaries
// (initdb, postgres) for -ledger postgres; default: the newest
// /usr/lib/postgresql/*/bin (Debian's postgresql package).
const envPostgresBin = "ONCEFLOW_POSTGRES_BIN"

// workerApp is the application_name prefix of the workers' connections
// to a -ledger postgres server: postgres-kill-backends terminates their
// backends, never the checker's.
const workerApp = "chaos-worker-"

// pgServer is a PostgreSQL cluster of the run's own (-ledger postgres),
// not the machine's: initdb'd into a temporary directory and run as the
// postgres user when chaos runs as root (initdb refuses root), on a free
// loopback port for its whole life, so that the postgres phases can
// restart it and terminate its backends without touching anyone else's.
type pgServer struct {
	bin, dir, data, logPath string
	port                    int
	cred                    *syscall.Credential // nil: run as this user
	spawn                   *childproc.Spawner

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	admin  *sql.DB
}

// startPostgres initdb's a cluster into a new temporary directory and
// starts it.
func startPostgres(ctx context.Context, spawn *childproc.Spawner, logPath string) (_ *pgServer, err error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	p := &pgServer{bin: bin, logPath: logPath, spawn: spawn}
	if p.dir, err = os.MkdirTemp("", "onceflow-chaos-pg-"); err != nil {
		return nil, fmt.Errorf("create PostgreSQL's directory (check TMPDIR): %w", err)
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	p.data = filepath.Join(p.dir, "data")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("-ledger postgres as root runs PostgreSQL as the user postgres, which is missing (install Debian's postgresql, or run chaos as another user): %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(p.dir, int(uid), int(gid)); err != nil {
			return nil, fmt.Errorf("give %s to the user postgres: %w", p.dir, err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", p.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.Dir, initdb.SysProcAttr = p.dir, &syscall.SysProcAttr{Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb %s: %w\n%s", p.data, err, out)
	}
	for range 5 {
		if p.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = p.start(ctx); err == nil {
			return p, nil
		}
	}
	return nil, err
}

// postgresBin is $ONCEFLOW_POSTGRES_BIN, else the newest Debian
// /usr/lib/postgresql/N/bin.
func postgresBin() (string, error) {
	if d := os.Getenv(envPostgresBin); d != "" {
		return d, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	if len(found) == 0 {
		return "", fmt.Errorf("-ledger postgres: no /usr/lib/postgresql/*/bin/initdb: install Debian's postgresql, or set %s to the directory of initdb and postgres", envPostgresBin)
	}
	return filepath.Dir(found[0]), nil
}

// version is N of /usr/lib/postgresql/N/bin/initdb.
func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// dsn is the DSN of the database postgres as app (its application_name).
func (p *pgServer) dsn(app string) string {
	q := url.Values{"sslmode": {"disable"}, "application_name": {app}}
	return "postgres://postgres@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) + "/postgres?" + q.Encode()
}

// start starts the server on its port, unless it runs, and waits until
// it answers.
func (p *pgServer) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open PostgreSQL's log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "fsync=on")
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.dir, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if err := p.spawn.Start(cmd); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	if p.admin == nil {
		if p.admin, err = sql.Open("pgx", p.dsn("chaos-admin")); err != nil {
			return err
		}
		p.admin.SetMaxOpenConns(2)
	}
	if err := waitServing(ctx, fmt.Sprintf("postgres on port %d", p.port), cmd, exited, p.logPath, time.Minute, p.admin.PingContext); err != nil {
		p.cmd = nil
		return err
	}
	return nil
}

// stop stops the server with sig (SIGINT: a fast shutdown that rolls back
// the open transactions; SIGQUIT: an immediate one, crash recovery at the
// next start) and waits until it is gone.
func (p *pgServer) stop(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// terminateWorkers terminates every backend of a worker that is inside a
// transaction (or a statement) now, and returns how many.
func (p *pgServer) terminateWorkers(ctx context.Context) (int, error) {
	rows, err := p.admin.QueryContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid()`, workerApp+"%")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var ok bool
		if err := rows.Scan(&ok); err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, rows.Err()
}

// close stops the server and removes its directory.
func (p *pgServer) close() {
	p.stop(syscall.SIGQUIT)
	if p.admin != nil {
		_ = p.admin.Close()
	}
	_ = os.RemoveAll(p.dir)
}

// postgresOf is the run's own server, which the postgres phases need
// (-ledger postgres).
func postgresOf(in *injector) *pgServer { return in.c.pg }

// injectPostgresRestart restarts PostgreSQL twice a phase, a fast and an
// immediate shutdown in turn, each started again a second later.
func injectPostgresRestart(ctx context.Context, in *injector, end time.Time) error {
	n := 0
	return in.every(ctx, end, in.c.cfg.phaseDuration/2, func() error {
		sig, what := syscall.SIGINT, "PostgreSQL fast shutdown, restarted"
		if n%2 == 1 {
			sig, what = syscall.SIGQUIT, "PostgreSQL immediate shutdown (crash recovery), restarted"
		}
		n++
		in.c.log.Info("chaos: " + what)
		postgresOf(in).stop(sig)
		in.c.tl.inject(what)
		sleepCtx(ctx, time.Second)
		if err := postgresOf(in).start(ctx); err != nil {
			return fmt.Errorf("restart PostgreSQL: %w", err)
		}
		return nil
	})
}

// injectPostgresKillBackends terminates (pg_terminate_backend) the
// workers' backends caught inside a transaction: about ten sweeps a
// phase, each watching for up to two seconds until it catches some.
func injectPostgresKillBackends(ctx context.Context, in *injector, end time.Time) error {
	return in.every(ctx, end, in.c.cfg.phaseDuration/10, func() error {
		until := time.Now().Add(2 * time.Second)
		for time.Now().Before(until) {
			n, err := postgresOf(in).terminateWorkers(ctx)
			if err != nil {
				in.c.log.Warn("chaos: pg_terminate_backend failed", "err", err)
				return nil
			}
			if n > 0 {
				for range n {
					in.c.tl.inject("PostgreSQL backend of a worker terminated in a transaction")
				}
				in.c.log.Info("chaos: terminated workers' backends", "n", n)
				return nil
			}
			if !sleepCtx(ctx, 5*time.Millisecond) {
				return ctx.Err()
			}
		}
		return nil
	})
}
