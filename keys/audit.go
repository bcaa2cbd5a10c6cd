package keys

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// AuditEntry records one change made through the API: who (the actor's
// key id, never the key), what (action, record), when, and which fields
// changed, by name only, so no value (and no secret) is ever in it.
type AuditEntry struct {
	ID             string    `json:"id"`
	Action         string    `json:"action"`
	ResourceType   string    `json:"resource_type"`
	ResourceID     string    `json:"resource_id"`
	ActorKeyID     string    `json:"actor_key_id"`
	ActorName      string    `json:"actor_name,omitempty"`
	WorkspaceID    string    `json:"workspace_id"`
	OrganisationID string    `json:"organisation_id"`
	ChangedFields  []string  `json:"changed_fields"`
	CreatedAt      time.Time `json:"created_at"`
}

// MaxAuditPage bounds one page of the audit log.
const MaxAuditPage = 1000

func (s *Store) auditDir(org, ws string) string {
	d := s.prefix + "/audit/" + org
	if ws != "" {
		d += "/" + ws
	}
	return d
}

// Audit stores e, filling its id and time.
func (s *Store) Audit(ctx context.Context, e *AuditEntry) error {
	if uuid.Validate(e.OrganisationID) != nil || uuid.Validate(e.WorkspaceID) != nil {
		return errors.New("keys: audit entries need a workspace and organisation UUID")
	}
	e.ID, e.CreatedAt = NewID(), s.now()
	if e.ChangedFields == nil {
		e.ChangedFields = []string{}
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.opts.KV.Store(context.WithoutCancel(ctx), s.auditDir(e.OrganisationID, e.WorkspaceID)+"/"+e.ID+".json", data)
}

// AuditLog returns up to limit entries of an organisation (ws empty) or
// one workspace, newest first, older than the entry id before (empty:
// from the newest), and whether more follow.
func (s *Store) AuditLog(ctx context.Context, org, ws, before string, limit int) ([]*AuditEntry, bool, error) {
	if uuid.Validate(org) != nil || (ws != "" && uuid.Validate(ws) != nil) {
		return nil, false, nil
	}
	names, err := kvstore.ListKeys(ctx, s.opts.KV, s.auditDir(org, ws), true)
	if err != nil {
		return nil, false, err
	}
	type item struct{ id, name string }
	items := make([]item, 0, len(names))
	for _, n := range names {
		if id, ok := strings.CutSuffix(path.Base(n), ".json"); ok && (before == "" || id < before) {
			items = append(items, item{id, n})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(b.id, a.id) })
	more := len(items) > limit
	items = items[:min(limit, len(items))]
	out := make([]*AuditEntry, 0, len(items))
	for _, it := range items {
		data, err := s.opts.KV.Load(ctx, it.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		e := new(AuditEntry)
		if json.Unmarshal(data, e) == nil {
			out = append(out, e)
		}
	}
	return out, more, nil
}

// ChangedFields names the members among fields (JSON names) whose
// encoding differs between before and after, two records of one type:
// for a new record, before is the type's zero value, so the members it
// was given are named. The values are compared, never returned, so an
// entry built from them holds no value.
func ChangedFields(before, after any, fields ...string) []string {
	var b, a map[string]json.RawMessage
	if raw, err := json.Marshal(before); err == nil {
		_ = json.Unmarshal(raw, &b)
	}
	if raw, err := json.Marshal(after); err == nil {
		_ = json.Unmarshal(raw, &a)
	}
	out := []string{}
	for _, f := range fields {
		if !equalJSON(b[f], a[f]) {
			out = append(out, f)
		}
	}
	return out
}

// equalJSON reports whether two encodings of a member say the same: an
// absent member, null and an empty list or object are one.
func equalJSON(x, y json.RawMessage) bool {
	empty := func(v json.RawMessage) bool {
		s := strings.TrimSpace(string(v))
		return s == "" || s == "null" || s == "[]" || s == "{}"
	}
	if empty(x) || empty(y) {
		return empty(x) && empty(y)
	}
	return string(x) == string(y)
}
