package keysapi

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// listAuditLogs: GET /v1/audit-logs?workspace_id=&limit=&before= → the
// changes made through this API, newest first. before is a cursor: the
// last id of the previous page. An entry names the acting key by id and
// the changed fields by name; no value is ever in it.
func listAuditLogs(c *call) (any, error) {
	filter, err := c.listScope(keys.KindAuditLog, c.r.URL.Query().Get("workspace_id"))
	if err != nil {
		return nil, err
	}
	limit, err := queryInt(c, "limit", 100, 1, keys.MaxAuditPage)
	if err != nil {
		return nil, err
	}
	entries, more, err := c.store.AuditLog(c.r.Context(), c.id.OrganisationID, filter, c.r.URL.Query().Get("before"), limit)
	if err != nil {
		return nil, err
	}
	out := list[*keys.AuditEntry]{Object: "list", Total: len(entries), Data: orEmptyList(entries), HasMore: more}
	if len(entries) > 0 {
		out.LastID = entries[len(entries)-1].ID
	}
	return out, nil
}
