package app

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// userWriteTimeout bounds the record-store write a user's first request
// (or a changed mapping) waits for.
const userWriteTimeout = 2 * time.Second

// watchUsers keeps the record store's user records (keys/users.go) from
// the token authenticator's validations: a user accepted is recorded (a
// write only on first sight or a changed mapping), one the IdP no longer
// admits (token_not_allowed) is disabled. Without a record store there
// are no records, and a token user's batches do not run.
func (a *App) watchUsers() {
	if a.tokens == nil || a.keyStore == nil {
		return
	}
	store, logger := a.keyStore, a.logger
	a.tokens.Observe(func(id *identity.Caller, r *jwtauth.Reason) {
		ctx, cancel := context.WithTimeout(context.Background(), userWriteTimeout)
		defer cancel()
		var err error
		switch {
		case id != nil:
			err = store.SeeUser(ctx, id)
		case r != nil && r.Code == jwtauth.CodeForbidden && r.UserID != "":
			err = store.DisableUser(ctx, r.UserID, r.Code)
		}
		if err != nil {
			// The user still authenticates (or is still refused):
			// only its record is behind.
			logger.Warn("user record not written", zap.Error(err))
		}
	})
}

// userCaller is Caller for a batch created by an identity provider's
// user: its record's caller while the record is active in the batch's
// workspace and organisation.
func (a *App) userCaller(c batches.Caller) (*identity.Caller, bool) {
	if a.keyStore == nil {
		return nil, false
	}
	id, ok := a.keyStore.UserCaller(c.Name, c.WorkspaceID)
	if !ok || id.OrganisationID != c.OrganisationID {
		return nil, false
	}
	return id, true
}

// Users returns the user records keep accepts (none without a record
// store).
func (a *App) Users(keep func(*keys.User) bool) []*keys.User {
	if a.keyStore == nil {
		return nil
	}
	return a.keyStore.Users(keep)
}
