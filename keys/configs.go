package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"go.uber.org/zap"
)

// Saved configs may carry provider credentials of their own (a target's
// api_key, cloud keys, a webhook's headers). A version whose body names
// any is stored as two parts: the body with the credentials masked, which
// lists and views read, and the whole body sealed with the encryption key
// (as a virtual key's credentials are), which only the routing path opens
// (Store.Config). Without an encryption key such a config is refused.

// configSecrets are the members of a config whose values are credentials,
// at any depth: the provider credentials (the members split moves out of
// a virtual key) and "headers", a webhook hook's request headers.
var configSecrets = map[string]bool{
	"api_key": true, "clouda_secret_access_key": true, "clouda_session_token": true,
	"cloudc_service_account_json": true, "headers": true,
}

// Masked replaces a credential's value in a redacted config.
const Masked = "****"

// RedactConfig returns body with the value of every credential member
// (configSecrets, at any depth; each value of a "headers" object) replaced
// by Masked, and whether it named any. Member names are compared after
// unescaping, so "api\u005fkey" is masked too. A body without credentials
// is returned as it is; a redacted one is re-encoded (member order may
// change). A body that does not decode is returned as nil, true: it is
// not shown.
func RedactConfig(body []byte) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, true
	}
	if !redact(v) {
		return body, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, true
	}
	return out, true
}

// redact masks v's credential members in place.
func redact(v any) bool {
	changed := false
	switch t := v.(type) {
	case map[string]any:
		for k, m := range t {
			if !configSecrets[k] {
				changed = redact(m) || changed
				continue
			}
			if h, ok := m.(map[string]any); ok && k == "headers" {
				for hk := range h {
					h[hk] = Masked
				}
				changed = changed || len(h) > 0
				continue
			}
			if m != nil && m != "" {
				t[k] = Masked
				changed = true
			}
		}
	case []any:
		for _, m := range t {
			changed = redact(m) || changed
		}
	}
	return changed
}

// configAAD binds a sealed body to its config and version.
func configAAD(id, version string) []byte { return []byte(id + "\x00config\x00" + version) }

// sealVersion keeps body as version v of r: in clear when it names no
// credential, else masked in v and sealed in r.Sealed.
func (s *Store) sealVersion(r *Config, v *ConfigVersion, body json.RawMessage) error {
	red, secret := RedactConfig(body)
	if !secret {
		v.Config = body
		return nil
	}
	if s.opts.Sealer == nil {
		return ErrNoSealer
	}
	if r.Sealed == nil {
		r.Sealed = map[string]*Sealed{}
	}
	v.Config = red
	r.Sealed[v.VersionID] = s.opts.Sealer.Seal(body, configAAD(r.ID, v.VersionID))
	return nil
}

// openConfig returns r as routing uses it: its latest version's whole
// body, opened; nil when that does not open (logged: the config is then
// not served, never served masked).
func (s *Store) openConfig(r *Config) *Config {
	l := r.Latest()
	if l == nil || r.Sealed[l.VersionID] == nil {
		return r
	}
	if s.opts.Sealer == nil {
		s.opts.Logger.Error("config is encrypted but no encryption_key is configured", zap.String("config", r.Slug))
		return nil
	}
	plain, _, err := s.opts.Sealer.Open(r.Sealed[l.VersionID], configAAD(r.ID, l.VersionID))
	if err != nil {
		s.opts.Logger.Error("config credentials do not open", zap.String("config", r.Slug), zap.Error(err))
		return nil
	}
	routed := *r
	routed.Sealed = nil
	routed.Versions = append(slices.Clip(r.Versions[:len(r.Versions)-1]), ConfigVersion{VersionID: l.VersionID, Config: plain, CreatedAt: l.CreatedAt})
	return &routed
}

// CreateConfig stores r, whose slug must be free in its workspace, with
// its first version (credentials sealed).
func (s *Store) CreateConfig(ctx context.Context, r *Config, body json.RawMessage) error {
	now := s.now()
	r.ID, r.CreatedAt, r.UpdatedAt, r.Version = NewID(), now, now, 1
	if r.Status == "" {
		r.Status = StatusActive
	}
	r.Versions = []ConfigVersion{{VersionID: NewID(), CreatedAt: now}}
	if err := s.sealVersion(r, &r.Versions[0], body); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, taken := s.ConfigRecord(r.WorkspaceID, r.Slug); taken {
		return ErrConflict
	}
	if err := s.aliasClash(r); err != nil {
		return err
	}
	return s.swap(ctx, kindConfigs, r.ID, nil, r)
}

// UpdateConfig applies fn to stored config id; a non-nil body becomes a
// new version (credentials sealed; the oldest are dropped beyond
// MaxConfigVersions). It is stored over the version it read, or fails
// with ErrVersionConflict (see UpdateAPIKey).
func (s *Store) UpdateConfig(ctx context.Context, id string, body json.RawMessage, fn func(*Config) error) (*Config, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := new(Config)
	old, err := s.loadRecord(ctx, kindConfigs, id, r)
	if err != nil {
		return nil, err
	}
	if err := fn(r); err != nil {
		return nil, err
	}
	if err := s.aliasClash(r); err != nil {
		return nil, err
	}
	now := s.now()
	if s.opts.Sealer != nil {
		// Versions stored before configs' credentials were sealed are
		// sealed by the next write.
		for i := range r.Versions {
			if v := &r.Versions[i]; r.Sealed[v.VersionID] == nil {
				if err := s.sealVersion(r, v, v.Config); err != nil {
					return nil, err
				}
			}
		}
	}
	if body != nil {
		v := ConfigVersion{VersionID: NewID(), CreatedAt: now}
		if err := s.sealVersion(r, &v, body); err != nil {
			return nil, err
		}
		r.Versions = append(r.Versions, v)
		if n := len(r.Versions) - MaxConfigVersions; n > 0 {
			for _, d := range r.Versions[:n] {
				delete(r.Sealed, d.VersionID)
			}
			r.Versions = r.Versions[n:]
		}
	}
	r.UpdatedAt = now
	r.Version++
	return r, s.swap(ctx, kindConfigs, r.ID, old, r)
}

// DeleteConfig removes config id.
func (s *Store) DeleteConfig(ctx context.Context, id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.remove(ctx, kindConfigs, id)
}

// AliasTakenError refuses a config whose alias another config of the
// workspace holds (Slug).
type AliasTakenError struct{ Alias, Slug string }

func (e *AliasTakenError) Error() string {
	return "keys: model alias " + e.Alias + " is held by config " + e.Slug
}

// aliasClash returns an *AliasTakenError when another config of r's
// workspace holds one of r's aliases. Called under writeMu, so writes on
// this instance cannot both take an alias; two instances writing at the
// same time can, and the index then routes by the older config
// (putAliases).
func (s *Store) aliasClash(r *Config) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, a := range r.Aliases {
		if e := s.idx.cfgAlias[wsName{r.WorkspaceID, a}]; e != nil && e.rec.ID != r.ID {
			return &AliasTakenError{Alias: a, Slug: e.rec.Slug}
		}
	}
	return nil
}

// ConfigAlias returns the active config of workspace whose aliases name
// model, as stored (its slug is what routing resolves).
func (s *Store) ConfigAlias(workspace, model string) (*Config, bool) {
	s.mu.RLock()
	e := s.idx.cfgAlias[wsName{workspace, model}]
	s.mu.RUnlock()
	if e == nil || e.routed == nil || e.rec.Status != StatusActive {
		return nil, false
	}
	return e.rec, true
}

// ConfigAliases returns the aliases of workspace's active configs of
// organisation org, unsorted.
func (s *Store) ConfigAliases(org, workspace string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for k, e := range s.idx.cfgAlias {
		if k.ws == workspace && e.routed != nil && e.rec.Status == StatusActive && e.rec.OrganisationID == org {
			out = append(out, k.name)
		}
	}
	return out
}

// putAliases indexes e's aliases. An alias another config holds already
// (two instances took it at the same time) stays with the older config
// (ids are UUIDv7: creation order), so every instance routes alike.
func (idx *index) putAliases(e *cfgEntry) {
	for _, a := range e.rec.Aliases {
		k := wsName{e.rec.WorkspaceID, a}
		if cur := idx.cfgAlias[k]; cur == nil || cur.rec.ID == e.rec.ID || e.rec.ID < cur.rec.ID {
			idx.cfgAlias[k] = e
		}
	}
}

// dropAliases removes old's aliases from the index, handing each to
// another config that holds it too, if any (see putAliases).
func (idx *index) dropAliases(old *Config) {
	for _, a := range old.Aliases {
		k := wsName{old.WorkspaceID, a}
		if cur := idx.cfgAlias[k]; cur == nil || cur.rec.ID != old.ID {
			continue
		}
		delete(idx.cfgAlias, k)
		for _, c := range idx.configs {
			if c.ID != old.ID && c.WorkspaceID == old.WorkspaceID && slices.Contains(c.Aliases, a) {
				if e := idx.cfgSlug[wsName{c.WorkspaceID, c.Slug}]; e != nil {
					idx.putAliases(e)
				}
			}
		}
	}
}
