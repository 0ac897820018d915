//go:build !nodev

// Package devtemporal runs a single-process Temporal server on SQLite:
// the one `worker -dev` embeds, persisted to a file (as the Temporal CLI's
// `temporal server start-dev --db-filename` does), and the one the
// end-to-end tests and cmd/chaos run in memory, as a process of their own
// (`worker dev-server`, package temporalproc), so that their
// race-instrumented test binaries never link the server.
//
// It configures the server's public packages the way the server's own
// temporaltest does; it is for development and tests, not production.
package devtemporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	"github.com/onceflow/onceflow/cmd/internal/freeport"
)

// DefaultAddress is where the server listens unless told otherwise: the
// Temporal CLI's and the SDK's default.
const DefaultAddress = "127.0.0.1:7233"

// DefaultNamespace is the namespace it registers unless told otherwise.
const DefaultNamespace = "default"

// ErrAddressInUse: something already listens on the server's address.
var ErrAddressInUse = errors.New("devtemporal: the address is in use")

// Config says how to run the server.
type Config struct {
	// Address is the frontend's host:port. Default DefaultAddress; port 0
	// picks a free one (Server.Address says which).
	Address string
	// DBFile is the SQLite file the server persists to, created with its
	// schema if missing. Empty: in memory, gone when the server stops.
	DBFile string
	// Namespaces are registered at start, if missing. Default
	// [DefaultNamespace].
	Namespaces []string
	// SearchAttributes are the custom search attributes of its namespaces:
	// registered when it creates a namespace, and added at start to one a
	// server of an earlier version created without them. Default: none.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's errors (its warnings at Debug). Default:
	// discarded.
	Logger *slog.Logger
}

// Server is a running server.
type Server struct {
	srv  temporal.Server
	addr string
}

// Start starts the server and returns once its frontend accepts
// connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Address == "" {
		cfg.Address = DefaultAddress
	}
	if len(cfg.Namespaces) == 0 {
		cfg.Namespaces = []string{DefaultNamespace}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	host, port, ports, err := listenable(cfg.Address)
	if err != nil {
		return nil, err
	}
	sqlCfg, err := prepareStore(cfg)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	services, err := serviceAddresses(host, port, ports)
	if err != nil {
		return nil, err
	}
	srv, err := newServer(serverConfig(addr, host, services, sqlCfg), &slogLogger{l: cfg.Logger})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("devtemporal: start the server: %w", err)
	}
	s := &Server{srv: srv, addr: addr}
	if err := s.waitReady(30 * time.Second); err != nil {
		_ = srv.Stop()
		return nil, err
	}
	for _, ns := range cfg.Namespaces {
		if err := s.ensureSearchAttributes(ns, cfg.SearchAttributes, 30*time.Second); err != nil {
			_ = srv.Stop()
			return nil, err
		}
	}
	return s, nil
}

// clusterName is the name of the server's one cluster.
const clusterName = "active"

// prepareStore returns the SQLite store's configuration, in memory or in
// cfg.DBFile (its schema created when the file is missing), with cfg's
// namespaces registered in it.
func prepareStore(cfg Config) (*config.SQL, error) {
	sqlCfg := &config.SQL{PluginName: sqliteplugin.PluginName, ConnectAttributes: map[string]string{}}
	if cfg.DBFile == "" {
		sqlCfg.ConnectAttributes["mode"] = "memory"
		sqlCfg.ConnectAttributes["cache"] = "shared"
		sqlCfg.DatabaseName = "onceflow-dev-" + strconv.FormatUint(rand.Uint64(), 36)
	} else {
		sqlCfg.ConnectAttributes["mode"] = "rwc"
		sqlCfg.ConnectAttributes["journal_mode"] = "wal"
		sqlCfg.DatabaseName = cfg.DBFile
		if _, err := os.Stat(cfg.DBFile); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(cfg.DBFile), 0o700); err != nil {
				return nil, fmt.Errorf("devtemporal: %w", err)
			}
			if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
				return nil, fmt.Errorf("devtemporal: create the Temporal schema in %s: %w", cfg.DBFile, err)
			}
		}
	}
	var namespaces []*sqliteschema.NamespaceConfig
	for _, ns := range cfg.Namespaces {
		nc, err := sqliteschema.NewNamespaceConfig(clusterName, ns, false, cfg.SearchAttributes)
		if err != nil {
			return nil, fmt.Errorf("devtemporal: namespace %s: %w", ns, err)
		}
		namespaces = append(namespaces, nc)
	}
	if err := sqliteschema.CreateNamespaces(sqlCfg, namespaces...); err != nil {
		return nil, fmt.Errorf("devtemporal: register the namespaces: %w", err)
	}
	return sqlCfg, nil
}

// serviceAddresses gives the server's four services their gRPC ports on
// host: the frontend port, the others free ones from ports.
func serviceAddresses(host string, port int, ports *freeport.Set) (map[string]config.Service, error) {
	services := map[string]config.Service{}
	for i, name := range []string{"frontend", "history", "matching", "worker"} {
		p := port
		if i > 0 {
			var err error
			if p, err = ports.Pick(); err != nil {
				return nil, fmt.Errorf("devtemporal: %w", err)
			}
		}
		services[name] = config.Service{RPC: config.RPC{GRPCPort: p, BindOnIP: host}}
	}
	return services, nil
}

// serverConfig is the server's configuration: one cluster whose frontend
// is at addr, services on host, the SQLite store of sqlCfg for both
// persistence and visibility, no archival.
func serverConfig(addr, host string, services map[string]config.Service, sqlCfg *config.SQL) *config.Config {
	return &config.Config{
		Global: config.Global{Membership: config.Membership{BroadcastAddress: host}},
		Persistence: config.Persistence{
			DefaultStore: sqliteplugin.PluginName, VisibilityStore: sqliteplugin.PluginName, NumHistoryShards: 1,
			DataStores: map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10, MasterClusterName: clusterName, CurrentClusterName: clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: addr}},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: addr},
	}
}

// newServer makes the server of sc, not started: every service in this
// process, logging to logger.
func newServer(sc *config.Config, logger *slogLogger) (temporal.Server, error) {
	authorizer, err := authorization.GetAuthorizerFromConfig(&sc.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("devtemporal: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&sc.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("devtemporal: %w", err)
	}
	// Static membership, as the Temporal CLI's dev server has it: no
	// ringpop, so a restarted server does not wait on the members a
	// previous run left in the database.
	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, svc := range sc.Services {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(svc.RPC.BindOnIP, strconv.Itoa(svc.RPC.GRPCPort)))
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(sc),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
			// Search attributes registered at start are seen at once.
			dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("devtemporal: %w", err)
	}
	return srv, nil
}

// ensureSearchAttributes adds to namespace ns those of want it lacks: a
// state directory kept from before they were registered at creation.
func (s *Server) ensureSearchAttributes(ns string, want map[string]enumspb.IndexedValueType, timeout time.Duration) error {
	if len(want) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tc, err := client.DialContext(ctx, client.Options{HostPort: s.addr, Namespace: ns, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("devtemporal: connect to register the search attributes of %s: %w", ns, err)
	}
	defer tc.Close()
	for {
		err := addMissing(ctx, tc, ns, want)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devtemporal: register the search attributes of namespace %s: %w", ns, err)
		case <-time.After(100 * time.Millisecond): // the namespace is not loaded yet
		}
	}
}

func addMissing(ctx context.Context, tc client.Client, ns string, want map[string]enumspb.IndexedValueType) error {
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return err
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, t := range want {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing[name] = t
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: missing})
	if err != nil {
		return err
	}
	return addMissing(ctx, tc, ns, want) // seen at once: ForceSearchAttributesCacheRefreshOnRead
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return s.addr }

// Stop stops the server.
func (s *Server) Stop() error { return s.srv.Stop() }

// waitReady waits until the frontend accepts TCP connections.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("devtemporal: the frontend at %s did not come up in %v: %w", s.addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listenable checks that addr can be listened on, and returns its host
// and port (a free one for port 0), and the ports of the server's other
// services are to be picked from (which never gives that port again).
func listenable(addr string) (string, int, *freeport.Set, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, nil, fmt.Errorf("devtemporal: address %q: want host:port such as %s: %w", addr, DefaultAddress, err)
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, nil, fmt.Errorf("devtemporal: address %q: the port must be a number from 0 to 65535", addr)
	}
	ports := freeport.New(host)
	if port == 0 {
		port, err = ports.Pick()
		if err != nil {
			return "", 0, nil, fmt.Errorf("devtemporal: find a free port on %s: %w", host, err)
		}
		return host, port, ports, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if errors.Is(err, syscall.EADDRINUSE) {
		return "", 0, nil, fmt.Errorf("%w: %s (another Temporal server, or another -dev worker?)", ErrAddressInUse, addr)
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("devtemporal: listen on %s: %w", addr, err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	ports.Reserve(port)
	return host, port, ports, l.Close()
}

// slogLogger is the server's log.Logger on a *slog.Logger: its errors as
// errors, its (many, benign) warnings and the rest at Debug.
type slogLogger struct {
	l    *slog.Logger
	tags []tag.Tag
}

var _ log.WithLogger = (*slogLogger)(nil)

func (s *slogLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(s.tags)+len(tags)+1)
	attrs = append(attrs, slog.String("component", "temporal-server"))
	for _, ts := range [][]tag.Tag{s.tags, tags} {
		for _, t := range ts {
			attrs = append(attrs, slog.Any(t.Key(), t.Value()))
		}
	}
	s.l.LogAttrs(ctx, level, msg, attrs...)
}

func (s *slogLogger) Debug(msg string, tags ...tag.Tag) { s.log(slog.LevelDebug, msg, tags) }
func (s *slogLogger) Info(msg string, tags ...tag.Tag)  { s.log(slog.LevelDebug, msg, tags) }
func (s *slogLogger) Warn(msg string, tags ...tag.Tag)  { s.log(slog.LevelDebug, msg, tags) }
func (s *slogLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

func (s *slogLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

func (s *slogLogger) Panic(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(msg)
}

// Fatal logs and exits, as the server's own zap logger does: the server
// calls it where it cannot go on (a listener it cannot open). It also
// says so on stderr, whatever the logger: the server's log may be a file
// or discarded, and a process that exits at start without a word cannot
// be diagnosed.
func (s *slogLogger) Fatal(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	line := "devtemporal: the embedded Temporal server stops the process: " + msg
	for _, ts := range [][]tag.Tag{s.tags, tags} {
		for _, t := range ts {
			line += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
		}
	}
	fmt.Fprintln(os.Stderr, line)
	os.Exit(1)
}

func (s *slogLogger) With(tags ...tag.Tag) log.Logger {
	return &slogLogger{l: s.l, tags: append(append([]tag.Tag(nil), s.tags...), tags...)}
}
