package observe

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Label bounds. Every metric series costs memory in the gateway and in the
// Prometheus that scrapes it, and model names and workspaces come from
// clients: a client sending made-up model names to a custom host would
// otherwise add about 50 series per name. So such label values come from a
// bounded set (LabelSet):
//
//   - models: the names the configuration gives (override_params.model in
//     saved configs, deployment aliases of virtual keys, the models of
//     prompt files) and the price catalog's model names, replaced on each
//     load; no client-chosen name ever gets its own value, since the first
//     names seen would otherwise be whatever a client sent first;
//   - workspaces: those of the configured gateway keys, plus the first
//     MaxSeenWorkspaces others seen;
//   - OtherLabel for everything else, and for values longer than
//     MaxLabelBytes or not valid UTF-8.
//
// The sets live with the collectors, for the life of the process, so a
// config reload neither resets them nor lets them grow past their bound.
const (
	// MaxSeenModels is how many distinct unconfigured, unpriced model
	// names get their own label value: none.
	MaxSeenModels = 0
	// MaxSeenWorkspaces is how many distinct unconfigured workspaces get
	// their own label value.
	MaxSeenWorkspaces = 100
	// MaxLabelBytes is the longest label value kept; longer values count
	// as OtherLabel.
	MaxLabelBytes = 128
	// OtherLabel stands for every value past a label's bound.
	OtherLabel = "_other"
)

// LabelSet bounds a label's values: the configured values, plus the first
// max others seen, are kept; any further value becomes OtherLabel. It is
// safe for concurrent use; Bound takes no lock for configured values.
type LabelSet struct {
	configured atomic.Pointer[map[string]struct{}]
	mu         sync.RWMutex
	seen       map[string]struct{}
	max        int
}

// NewLabelSet returns a set admitting the configured values allow and up
// to limit further values.
func NewLabelSet(limit int, allow ...string) *LabelSet {
	s := &LabelSet{seen: make(map[string]struct{}, limit), max: limit}
	s.SetConfigured(allow)
	return s
}

// SetConfigured replaces the configured values, as a config load does:
// values seen so far keep their label.
func (s *LabelSet) SetConfigured(names []string) {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		if n != "" && len(n) <= MaxLabelBytes && utf8.ValidString(n) {
			set[n] = struct{}{}
		}
	}
	s.configured.Store(&set)
}

// Allow adds configured values, beyond the bound of seen ones.
func (s *LabelSet) Allow(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.configured.Load()
	names := make([]string, 0, len(values)+len(*old))
	for n := range *old {
		names = append(names, n)
	}
	s.SetConfigured(append(names, values...))
}

// Bound returns v when the set holds it or has room for it, else
// OtherLabel. Empty stays empty. A nil set keeps every value, truncated
// to MaxLabelBytes.
func (s *LabelSet) Bound(v string) string {
	if s == nil {
		return truncLabel(v)
	}
	if v == "" {
		return ""
	}
	if len(v) > MaxLabelBytes || !utf8.ValidString(v) {
		return OtherLabel
	}
	if c := s.configured.Load(); c != nil {
		if _, ok := (*c)[v]; ok {
			return v
		}
	}
	if s.max == 0 {
		return OtherLabel // the usual case for models: one map lookup
	}
	s.mu.RLock()
	_, ok := s.seen[v]
	full := len(s.seen) >= s.max
	s.mu.RUnlock()
	if ok {
		return v
	}
	if full {
		return OtherLabel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return OtherLabel
	}
	// v may be a slice of a request body; keep a copy of our own.
	v = strings.Clone(v)
	s.seen[v] = struct{}{}
	return v
}

func truncLabel(v string) string {
	if len(v) > MaxLabelBytes {
		v = v[:MaxLabelBytes]
	}
	return v
}

// Models and Workspaces are the process's bounds of the model and
// workspace labels, used by every metric that carries them. They sit
// beside the collectors they bound, which are process-wide too (see
// metrics.go): a reload replaces their configured values.
var (
	Models     = NewLabelSet(MaxSeenModels)
	Workspaces = NewLabelSet(MaxSeenWorkspaces)
)

// defaultBounds applies Models and Workspaces.
var defaultBounds = &LabelBounds{Model: Models, Workspace: Workspaces}

// SetConfiguredModels declares the models the configuration names and the
// price catalog's model names: they, and only they, keep their own label
// value. The llm app calls it on each load; AllowModels adds to the set.
func SetConfiguredModels(names []string) { Models.SetConfigured(names) }

// AllowModels adds model names to those SetConfiguredModels declared, for
// parts of the configuration loaded after it (prompt files).
func AllowModels(names ...string) {
	if len(names) > 0 {
		Models.Allow(names...)
	}
}

// SetConfiguredWorkspaces declares the workspaces of the configured
// gateway keys. The llm app calls it on each load.
func SetConfiguredWorkspaces(ids []string) { Workspaces.SetConfigured(ids) }

// providerLabel keeps the provider label to registered provider slugs (and
// "gateway" for the gateway's own answers).
func providerLabel(p string) string {
	if p == "gateway" || p == "" {
		return p
	}
	if _, ok := providers.Lookup(p); ok {
		return p
	}
	return OtherLabel
}

// ModelsInConfig returns the models a routing config names
// (override_params.model at any level of its targets). The config was
// validated at load, so its depth is bounded; the walk stops at 128 levels
// anyway.
func ModelsInConfig(config []byte) []string {
	var out []string
	var walk func(r gjson.Result, depth int)
	walk = func(r gjson.Result, depth int) {
		if depth > 128 {
			return
		}
		switch {
		case r.IsObject():
			if m := r.Get("override_params.model"); m.Type == gjson.String {
				out = append(out, m.Str)
			}
			r.ForEach(func(_, v gjson.Result) bool {
				walk(v, depth+1)
				return true
			})
		case r.IsArray():
			r.ForEach(func(_, v gjson.Result) bool {
				walk(v, depth+1)
				return true
			})
		}
	}
	walk(gjson.ParseBytes(config), 0)
	return out
}
