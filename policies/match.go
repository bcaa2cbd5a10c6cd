package policies

import "strings"

// Attribute keys a condition or group_by entry may name, besides
// "metadata.<key>".
const (
	KeyWorkspaceID    = "workspace_id"
	KeyOrganisationID = "organisation_id"
	KeyAPIKey         = "api_key"
	KeyVirtualKey     = "virtual_key"
	KeyProvider       = "provider"
	KeyModel          = "model"
	KeyConfigID       = "config_id"
	// MetadataPrefix starts keys that read one entry of the request's
	// metadata, such as "metadata._user".
	MetadataPrefix = "metadata."
)

// Attributes is what a request is matched and grouped on. The HTTP layer
// fills it once per request. APIKey is the gateway key's name, never its
// secret, because attribute values end up in counter keys (and so in Redis)
// and in policy conditions that administrators read.
type Attributes struct {
	WorkspaceID    string
	OrganisationID string
	APIKey         string
	VirtualKey     string
	Provider       string
	Model          string
	ConfigID       string
	Metadata       map[string]string
	// Pending lists the groups of attributes not filled in yet (see
	// Match); 0 when the caller fills everything up front.
	Pending Pending
}

// Get returns the value of an attribute key and whether it is present. An
// empty value counts as absent, so that a wildcard condition cannot be met
// by a field the request simply did not set. Unknown keys are absent.
func (a *Attributes) Get(key string) (string, bool) {
	if a == nil {
		return "", false
	}
	var v string
	switch key {
	case KeyWorkspaceID:
		v = a.WorkspaceID
	case KeyOrganisationID:
		v = a.OrganisationID
	case KeyAPIKey:
		v = a.APIKey
	case KeyVirtualKey:
		v = a.VirtualKey
	case KeyProvider:
		v = a.Provider
	case KeyModel:
		v = a.Model
	case KeyConfigID:
		v = a.ConfigID
	default:
		if len(key) > len(MetadataPrefix) && key[:len(MetadataPrefix)] == MetadataPrefix {
			v = a.Metadata[key[len(MetadataPrefix):]]
		}
	}
	return v, v != ""
}

// Set sets the attribute key (a key Get knows) to v; the twin of Get.
// Unknown keys are ignored.
func (a *Attributes) Set(key, v string) {
	switch key {
	case KeyWorkspaceID:
		a.WorkspaceID = v
	case KeyOrganisationID:
		a.OrganisationID = v
	case KeyAPIKey:
		a.APIKey = v
	case KeyVirtualKey:
		a.VirtualKey = v
	case KeyProvider:
		a.Provider = v
	case KeyModel:
		a.Model = v
	case KeyConfigID:
		a.ConfigID = v
	default:
		if len(key) > len(MetadataPrefix) && key[:len(MetadataPrefix)] == MetadataPrefix {
			if a.Metadata == nil {
				a.Metadata = make(map[string]string, 1)
			}
			a.Metadata[key[len(MetadataPrefix):]] = v
		}
	}
}

// isAllowedKey reports whether key names an attribute Get knows.
func isAllowedKey(key string) bool {
	switch key {
	case KeyWorkspaceID, KeyOrganisationID, KeyAPIKey, KeyVirtualKey, KeyProvider, KeyModel, KeyConfigID:
		return true
	}
	return len(key) > len(MetadataPrefix) && strings.HasPrefix(key, MetadataPrefix)
}

// Pending is a set of attribute groups a caller has not filled in yet,
// because learning them costs something (parsing headers, resolving the
// routing, reading the body). Match says which of them it needs, so the
// enforcement path fills only what a policy actually reads.
type Pending uint8

// Groups of lazily filled attributes.
const (
	// PendingRouting covers provider, virtual_key and config_id.
	PendingRouting Pending = 1 << iota
	// PendingMetadata covers every metadata.<key>.
	PendingMetadata
	// PendingModel covers model, which is in the body.
	PendingModel
)

// PendingOf returns the group whose filling provides key, or 0 for the
// attributes known as soon as the caller is authenticated (workspace_id,
// organisation_id, api_key) and for unknown keys.
func PendingOf(key string) Pending {
	switch key {
	case KeyProvider, KeyVirtualKey, KeyConfigID:
		return PendingRouting
	case KeyModel:
		return PendingModel
	}
	if len(key) > len(MetadataPrefix) && key[:len(MetadataPrefix)] == MetadataPrefix {
		return PendingMetadata
	}
	return 0
}

// InScope reports whether the policy belongs to the tenant given by a
// workspace and an organisation: its workspace and organisation are each
// either unset (a Caddyfile policy, which applies everywhere) or equal.
// A policy out of scope is invisible to the tenant's keys in the API and
// never applies to their requests, whatever its conditions say.
func (p *Policy) InScope(workspaceID, organisationID string) bool {
	return (p.OrganisationID == "" || p.OrganisationID == organisationID) &&
		(p.WorkspaceID == "" || p.WorkspaceID == workspaceID)
}

// Match is the one policy matcher: the enforcement path and Matches both
// use it. It reports whether the policy applies to a request described by
// a, or, when need is not 0, that the answer depends on the attribute
// groups in need, which a.Pending says are not filled yet: fill them,
// clear them from a.Pending and call again. A policy out of the request's
// tenant (see InScope) never applies. Otherwise every condition must hold:
// the attribute is present and equal to the condition's value, or present
// (non-empty) for the value "*"; an absent attribute never matches.
// Conditions on filled attributes are tested first, so a policy that
// fails on them needs nothing filled. Match does not look at Status;
// Store.Active returns active policies. It does not allocate.
func (p *Policy) Match(a *Attributes) (ok bool, need Pending) {
	if a == nil || !p.InScope(a.WorkspaceID, a.OrganisationID) {
		return false, 0
	}
	for i := range p.Conditions {
		c := &p.Conditions[i]
		if a.Pending != 0 {
			if g := PendingOf(c.Key); g&a.Pending != 0 {
				need |= g
				continue
			}
		}
		v, ok := a.Get(c.Key)
		if !ok || (c.Value != "*" && v != c.Value) {
			return false, 0
		}
	}
	return need == 0, need
}

// Matches reports whether the policy applies to a request whose
// attributes are all filled in (see Match); with groups still pending it
// reports false.
func (p *Policy) Matches(a *Attributes) bool {
	ok, need := p.Match(a)
	return ok && need == 0
}

// Needs returns the pending groups GroupKey reads for this policy.
func (p *Policy) Needs() Pending {
	var n Pending
	for i := range p.GroupBy {
		n |= PendingOf(p.GroupBy[i].Key)
	}
	return n
}

// GroupKey returns the counter key of the request under this policy: the
// policy id followed by each group_by key and the request's value of it,
// as "id|key=value|key=value". Backslash, "|" and "=" are escaped with a
// backslash in every part, so distinct tuples never share a key (("a|b",
// "c") and ("a", "b|c") differ). The key names are included so that editing
// a policy's group_by starts new counters instead of reusing ones that
// counted something else. An absent attribute counts as the empty value.
// An api_key value is preceded by the key's workspace ("api_key=ws=name"),
// since key names are unique only within a workspace.
// It allocates once: the key itself.
func (p *Policy) GroupKey(a *Attributes) string {
	// Values and escaped lengths are computed once, on the stack for the
	// usual handful of group_by keys.
	var vbuf [8]string
	var lbuf [8]int
	vals, lens := vbuf[:0], lbuf[:0]
	if len(p.GroupBy) > len(vbuf) {
		vals, lens = make([]string, 0, len(p.GroupBy)), make([]int, 0, len(p.GroupBy))
	}
	idLen := escapedLen(p.ID)
	n := idLen
	wsLen := -1
	for i := range p.GroupBy {
		k := p.GroupBy[i].Key
		v, _ := a.Get(k)
		kl, vl := escapedLen(k), escapedLen(v)
		if k == KeyAPIKey && v != "" {
			// Key names are unique within a workspace only: grouped by
			// name alone, two workspaces' keys named alike would share
			// (and exhaust) one counter under a policy spanning
			// workspaces (a Caddyfile or organisation policy). The
			// workspace goes first, ended by an unescaped "=", which no
			// escaped part holds.
			if wsLen < 0 {
				wsLen = escapedLen(a.WorkspaceID)
			}
			n += wsLen + 1
		}
		vals, lens = append(vals, v), append(lens, kl, vl)
		n += 2 + kl + vl
	}
	var b strings.Builder
	b.Grow(n)
	writeEscaped(&b, p.ID, idLen)
	for i := range p.GroupBy {
		b.WriteByte('|')
		writeEscaped(&b, p.GroupBy[i].Key, lens[2*i])
		b.WriteByte('=')
		if p.GroupBy[i].Key == KeyAPIKey && vals[i] != "" {
			writeEscaped(&b, a.WorkspaceID, wsLen)
			b.WriteByte('=')
		}
		writeEscaped(&b, vals[i], lens[2*i+1])
	}
	return b.String()
}

// escapable marks the bytes GroupKey escapes: a table lookup per byte is
// the cheapest scan for the short strings of a counter key.
var escapable = [256]bool{'\\': true, '|': true, '=': true}

// escapedLen is the length of s once escaped. Longer strings (ids) are
// first checked with the vectorised IndexByte, which beats a byte loop.
func escapedLen(s string) int {
	n := len(s)
	if n >= 16 && strings.IndexByte(s, '|') < 0 && strings.IndexByte(s, '=') < 0 && strings.IndexByte(s, '\\') < 0 {
		return n
	}
	for i := 0; i < len(s); i++ {
		if escapable[s[i]] {
			n++
		}
	}
	return n
}

// writeEscaped writes s escaped; escLen is escapedLen(s), so strings with
// nothing to escape (almost all) are copied without a second scan.
func writeEscaped(b *strings.Builder, s string, escLen int) {
	if escLen == len(s) {
		b.WriteString(s)
		return
	}
	start := 0
	for i := 0; i < len(s); i++ {
		if escapable[s[i]] {
			b.WriteString(s[start:i])
			b.WriteByte('\\')
			b.WriteByte(s[i])
			start = i + 1
		}
	}
	b.WriteString(s[start:])
}
