package cost

// Models returns the model names the catalog prices, each once, in no
// particular order. The metrics give these names (and the configured
// ones) their own model label value; any other name is "_other".
func (c *Catalog) Models() []string {
	if c == nil {
		return nil
	}
	seen := make(map[string]struct{}, c.Len())
	out := make([]string, 0, c.Len())
	add := func(m string) {
		if _, ok := seen[m]; !ok {
			seen[m] = struct{}{}
			out = append(out, m)
		}
	}
	for _, models := range c.byProvider {
		for m := range models {
			add(m)
		}
	}
	for m := range c.anyProvider {
		add(m)
	}
	return out
}
