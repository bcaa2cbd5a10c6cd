package cost

import (
	_ "embed"
	"errors"
	"math"
)

// Context windows. A model's window is LiteLLM's max_input_tokens: the
// most input tokens it accepts. Token preflight (handlers/preflight.go)
// passes over a target whose model's window the request's input exceeds,
// without calling it. The built-in windows are windows.json, hand-kept
// from the providers' model pages (the price database the prices come
// from has none); an operator's price_catalog file adds or replaces
// windows with max_input_tokens, in an entry with or without prices.

//go:embed windows.json
var windowsJSON []byte

// MaxWindow bounds a context window read from a file, so that arithmetic
// on it cannot overflow; no model comes near it.
const MaxWindow = 1 << 40

// Window returns the context window of model served by provider, in input
// tokens, resolved as Price resolves names (a dated snapshot has its
// family's window unless listed). False when the catalog knows none.
func (c *Catalog) Window(provider, model string) (int64, bool) {
	if c == nil || len(c.windows) == 0 {
		return 0, false
	}
	var w int64
	found := resolve(provider, model, func(provider, name string) bool {
		var ok bool
		if w, ok = c.windows[provider][name]; ok {
			return true
		}
		if parent, inherit := inherits[provider]; inherit {
			if w, ok = c.windows[parent][name]; ok {
				return true
			}
		}
		w, ok = c.windows[""][name]
		return ok
	})
	return w, found
}

func (c *Catalog) putWindow(provider, model string, w int64) {
	if c.windows == nil {
		c.windows = map[string]map[string]int64{}
	}
	m := c.windows[provider]
	if m == nil {
		m = map[string]int64{}
		c.windows[provider] = m
	}
	m[model] = w
}

// window checks an entry's max_input_tokens: 0 when absent.
func (e *entry) window() (int64, error) {
	if e.MaxInput == nil {
		return 0, nil
	}
	v := *e.MaxInput
	if v < 0 || v > MaxWindow || math.IsNaN(v) || v != math.Trunc(v) {
		return 0, errors.New("max_input_tokens must be a whole number of tokens")
	}
	return int64(v), nil
}
