package ledger

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuMeter adds up the CPU time (user and system) this process, and the
// PostgreSQL server processes serving its connections, spend while it
// runs: the writer's cost per record, which wall time on a machine
// shared with other work overstates.
type cpuMeter struct {
	self, server time.Duration
	// pg reads the PostgreSQL backends' pids; nil for SQLite.
	pg      *sql.DB
	appName string

	running                bool
	selfStart, serverStart time.Duration
}

// start begins a measured stretch.
func (m *cpuMeter) start() {
	m.running = true
	m.selfStart, m.serverStart = processCPU(), m.serverCPU()
}

// stop ends a measured stretch, adding it to the totals.
func (m *cpuMeter) stop() {
	if !m.running {
		return
	}
	m.running = false
	m.self += processCPU() - m.selfStart
	m.server += m.serverCPU() - m.serverStart
}

// report adds the CPU per record to b's metrics.
func (m *cpuMeter) report(b *testing.B, records int) {
	m.stop()
	b.ReportMetric(float64(m.self.Nanoseconds())/float64(records), "cpu-ns/record")
	if m.pg != nil {
		b.ReportMetric(float64(m.server.Nanoseconds())/float64(records), "pg-cpu-ns/record")
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time of the PostgreSQL backends whose connection
// carries m's application name, read from /proc (the test server runs
// on this host); 0 where that cannot be read.
func (m *cpuMeter) serverCPU() time.Duration {
	if m.pg == nil {
		return 0
	}
	rows, err := m.pg.QueryContext(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", m.appName)
	if err != nil {
		return 0
	}
	defer rows.Close()
	var total time.Duration
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			total += pidCPU(pid)
		}
	}
	return total
}

// pidCPU is a process's user and system CPU time from /proc/<pid>/stat.
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of the whole line, in clock
	// ticks (100 a second on Linux).
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}
