package observe

import (
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Label bounds. Every metric series costs memory in the gateway and in the
// Prometheus that scrapes it, and the model name comes from the client: a
// client sending made-up model names to a custom host would otherwise add
// about 30 series per name. So model label values come from a bounded set:
//
//   - every model named in the configuration (override_params.model in
//     saved configs, deployment aliases of virtual keys), set on each load;
//   - the first MaxSeenModels other distinct names the gateway sees answered;
//   - OtherLabel for everything after that.
//
// The seen set lives with the collectors, for the life of the process, so
// a config reload neither resets it nor lets it grow past its bound.
const (
	// MaxSeenModels is how many distinct unconfigured model names get
	// their own label value.
	MaxSeenModels = 100
	// MaxLabelBytes is the longest label value kept; longer names count
	// as OtherLabel.
	MaxLabelBytes = 128
	// OtherLabel stands for every value past a label's bound.
	OtherLabel = "_other"
)

// modelLabels is the bounded set of model label values.
type modelLabels struct {
	configured atomic.Pointer[map[string]struct{}]
	mu         sync.RWMutex
	seen       map[string]struct{}
	max        int
}

var models = newModelLabels(MaxSeenModels)

func newModelLabels(max int) *modelLabels {
	return &modelLabels{seen: make(map[string]struct{}, max), max: max}
}

// SetConfiguredModels declares the models named in the configuration; they
// always keep their own label value. The llm app calls it on each load.
func SetConfiguredModels(names []string) {
	models.setConfigured(names)
}

func (m *modelLabels) setConfigured(names []string) {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		if n != "" && len(n) <= MaxLabelBytes && utf8.ValidString(n) {
			set[n] = struct{}{}
		}
	}
	m.configured.Store(&set)
}

// label returns the label value for model.
func (m *modelLabels) label(model string) string {
	if model == "" {
		return ""
	}
	if len(model) > MaxLabelBytes || !utf8.ValidString(model) {
		return OtherLabel
	}
	if c := m.configured.Load(); c != nil {
		if _, ok := (*c)[model]; ok {
			return model
		}
	}
	m.mu.RLock()
	_, ok := m.seen[model]
	full := len(m.seen) >= m.max
	m.mu.RUnlock()
	if ok {
		return model
	}
	if full {
		return OtherLabel
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[model]; ok {
		return model
	}
	if len(m.seen) >= m.max {
		return OtherLabel
	}
	m.seen[model] = struct{}{}
	return model
}

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
