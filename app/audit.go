package app

import (
	"context"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// Audit records a change made through a management API in the audit log
// (keys.Store.Audit, read through GET /v1/audit-logs): the acting key by
// record id and name, the action (resource.verb), the record, its
// workspace and organisation, and the names of the fields that changed,
// never their values. Every API that changes records writes its entries
// here. A failure is logged and the change stands: the change was made.
func (a *App) Audit(ctx context.Context, actor *identity.Caller, action, resourceType, resourceID, ws, org string, fields []string) {
	if a.keyStore == nil || actor == nil {
		return
	}
	e := &keys.AuditEntry{Action: action, ResourceType: resourceType, ResourceID: resourceID, ActorKeyID: actor.KeyID,
		ActorName: actor.Name, WorkspaceID: ws, OrganisationID: org, ChangedFields: fields}
	if err := a.keyStore.Audit(ctx, e); err != nil {
		a.KeysLogger().Error("writing the audit log failed", zap.String("action", action), zap.Error(err))
	}
}
