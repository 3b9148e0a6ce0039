package storetest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PgBouncerPoolSize is how many server connections the PgBouncer of
// PrivatePgBouncer opens per database: few, so that a test's clients really
// do share them and anything that assumes a connection of its own breaks.
const PgBouncerPoolSize = 4

// PrivatePgBouncer runs a PgBouncer of this test's own in transaction pooling
// mode in front of the Postgres database that databaseURL names (one from
// DatabaseURL), and returns the URL of the same database through it. The
// pooler listens on a free port of 127.0.0.1, accepts any client without a
// password and logs in to Postgres as databaseURL does, opening at most
// PgBouncerPoolSize server connections. It runs as a child of the test
// process (as the postgres OS user when the test runs as root: PgBouncer
// refuses root) and stops when the test ends.
//
// Debian's pgbouncer is 1.18, which keeps no protocol-level prepared
// statement across server connections, like any PgBouncer before 1.21 or
// one without max_prepared_statements.
func PrivatePgBouncer(t testing.TB, databaseURL string) string {
	t.Helper()
	bin := pgbouncerBin(t)
	server, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		t.Fatalf("storetest: parse %s: %v", databaseURL, err)
	}
	cred, uid, gid := postgresCredential(t)
	// Not t.TempDir: its parent is the test's own, which the postgres user
	// may not enter.
	dir, err := os.MkdirTemp("", "hookwheel-pgbouncer-")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("storetest: chown %s to the postgres user: %v", dir, err)
		}
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	// Every database name goes to the same-named database on the server,
	// logged in as databaseURL's user whatever the client says (auth_type
	// any), so the pooled URL differs from databaseURL in its port alone.
	target := fmt.Sprintf("host=%s port=%d user=%s", server.Host, server.Port, pgbouncerValue(server.User))
	if server.Password != "" {
		target += " password=" + pgbouncerValue(server.Password)
	}
	config := func(port int) string {
		return "[databases]\n" +
			"* = " + target + "\n" +
			"[pgbouncer]\n" +
			"listen_addr = 127.0.0.1\n" +
			"listen_port = " + strconv.Itoa(port) + "\n" +
			"unix_socket_dir =\n" +
			"auth_type = any\n" +
			"pool_mode = transaction\n" +
			"default_pool_size = " + strconv.Itoa(PgBouncerPoolSize) + "\n" +
			"min_pool_size = 0\n" +
			"reserve_pool_size = 0\n" +
			"max_client_conn = 500\n" +
			"server_tls_sslmode = disable\n" +
			// Clients may send it (libpq-based tools do); PgBouncer
			// refuses unknown startup parameters otherwise.
			"ignore_startup_parameters = extra_float_digits\n"
	}
	pooled, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("storetest: parse %s: %v", databaseURL, err)
	}

	s := &PrivateService{
		t:    t,
		name: "pgbouncer",
		dir:  dir,
		urlFor: func(port int) string {
			u := *pooled
			u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			return u.String()
		},
		command: func(port int) []string {
			if err := os.WriteFile(ini, []byte(config(port)), 0o644); err != nil {
				t.Fatalf("storetest: write %s: %v", ini, err)
			}
			return []string{bin, ini}
		},
		ping: func(ctx context.Context, url string) error {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
			return err
		},
		stopSignal:  syscall.SIGTERM, // immediate shutdown: SIGINT would wait for clients
		deathSignal: syscall.SIGKILL,
		cred:        cred,
		logs:        newTailBuffer(32 << 10),
	}
	s.firstStart()
	return s.URL()
}

// pgbouncerValue quotes v for a connection string of PgBouncer's [databases].
func pgbouncerValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " '\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// pgbouncerBin finds pgbouncer on PATH or where Debian puts it (/usr/sbin,
// not on every user's PATH).
func pgbouncerBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	const debian = "/usr/sbin/pgbouncer"
	if fi, err := os.Stat(debian); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return debian
	}
	t.Fatalf("storetest: pgbouncer not found on PATH or in /usr/sbin: these tests need it; " +
		"run `make test` (deploy/dev/services.sh installs it), or install the pgbouncer package")
	return ""
}
