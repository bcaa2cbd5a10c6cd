// Package metricset is how the gateway's packages put their Prometheus
// collectors into Caddy's metrics registry, and the list of every metric
// the gateway exports.
//
// Caddy builds a new registry for each config load
// (research/caddy.md §4.3), so collectors are created once per process
// and registered into each load's registry: counters then stay monotonic
// across reloads. Each package declares its collectors once (Declare),
// which also records them for Names, so tests can check a dashboard or a
// docs page against what is really exported, and registers that list on
// every load (Register).
package metricset

import (
	"errors"
	"regexp"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var declared struct {
	sync.Mutex
	cs []prometheus.Collector
}

// Declare records cs as collectors the gateway exports and returns them,
// for the package's Register calls. Packages call it in a package-level
// variable, so every linked package's metrics are known to Names. A
// collector built per config load (one that reads that load's state when
// scraped) declares an instance that only describes its metrics.
func Declare(cs ...prometheus.Collector) []prometheus.Collector {
	declared.Lock()
	declared.cs = append(declared.cs, cs...)
	declared.Unlock()
	return cs
}

// Register registers cs into reg, a config load's registry, which may
// already hold them from an earlier load. A nil reg registers nothing.
func Register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	if r, ok := reg.(*prometheus.Registry); ok && r == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// Replace registers c into reg in place of a collector with the same
// descriptors registered earlier: a per-load collector whose reg (a
// registry an earlier load also used) must read the new load's state.
func Replace(reg prometheus.Registerer, c prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	if r, ok := reg.(*prometheus.Registry); ok && r == nil {
		return nil
	}
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		reg.Unregister(are.ExistingCollector)
		err = reg.Register(c)
	}
	return err
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names returns the fully qualified name of every metric the declared
// collectors describe.
func Names() map[string]bool {
	declared.Lock()
	cs := append([]prometheus.Collector(nil), declared.cs...)
	declared.Unlock()
	names := map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}
