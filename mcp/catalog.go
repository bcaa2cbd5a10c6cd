package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A catalog is what one server offers, as last listed: the tools its
// `tools` patterns expose and its prompts, each sorted by name. A listing
// serves for catalogTTL (or until the server says its list changed), then
// the next request lists again in the background while the old listing
// keeps serving; a server that cannot be listed is tried again after
// catalogRetry, not on every request.

// Catalog timings and bounds.
const (
	catalogTTL   = time.Minute
	catalogRetry = time.Second
	// listTimeout bounds one listing (every page).
	listTimeout = 30 * time.Second
	// maxListed bounds the tools, and the prompts, kept of one server;
	// maxPages the pages read to list them.
	maxListed = 1024
	maxPages  = 64
)

// listing is one successful listing of a server.
type listing struct {
	tools   []*sdk.Tool
	prompts []*sdk.Prompt
	// instructions are the server's, served on /mcp/{server}.
	instructions string
	// version tells listings of one server apart, so views built from an
	// older one are not reused.
	version uint64
}

type catalog struct {
	mu      sync.Mutex
	cur     *listing
	at      time.Time
	stale   bool
	err     error
	errAt   time.Time
	running chan struct{}
	version uint64
}

// invalidate marks the listing stale (the server said its list changed).
func (c *catalog) invalidate() {
	c.mu.Lock()
	c.stale = true
	c.mu.Unlock()
}

// listing returns u's current listing, listing the server first when
// none has succeeded yet (waiting for a listing under way), and in the
// background when the current one is stale. A server never listed
// returns the last listing error.
func (u *remote) listing(ctx context.Context) (*listing, error) {
	c := &u.catalog
	now := time.Now()
	c.mu.Lock()
	fresh := c.cur != nil && !c.stale && now.Sub(c.at) < catalogTTL
	retryLater := c.err != nil && now.Sub(c.errAt) < catalogRetry
	if fresh || c.cur != nil && (c.running != nil || retryLater) {
		cur := c.cur
		c.mu.Unlock()
		return cur, nil
	}
	if c.cur == nil && retryLater {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	wait := c.running
	if wait == nil {
		wait = make(chan struct{})
		c.running = wait
		go u.refresh(wait)
	}
	cur := c.cur
	c.mu.Unlock()
	if cur != nil {
		return cur, nil // stale: served while the refresh runs
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return c.cur, nil
	}
	return nil, c.err
}

// refresh lists the server and records the outcome, then closes done.
func (u *remote) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(u.life, listTimeout)
	defer cancel()
	l, err := u.list(ctx)
	c := &u.catalog
	c.mu.Lock()
	if err == nil {
		c.version++
		l.version = c.version
		c.cur, c.at, c.stale, c.err = l, time.Now(), false, nil
	} else {
		c.err, c.errAt = err, time.Now()
	}
	c.running = nil
	c.mu.Unlock()
	close(done)
}

// list reads the server's tools and, when it has them, prompts.
func (u *remote) list(ctx context.Context) (*listing, error) {
	cs, err := u.session(ctx)
	if err != nil {
		return nil, errors.New(unreachable(u.cfg.Name, err))
	}
	l := &listing{}
	if ir := cs.InitializeResult(); ir != nil {
		l.instructions = ir.Instructions
	}
	var cursor string
	for page := 0; page < maxPages; page++ {
		res, err := cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, u.listError(cs, "tools", err)
		}
		for _, t := range res.Tools {
			if t != nil && u.cfg.ToolExposed(t.Name) && len(l.tools) < maxListed {
				l.tools = append(l.tools, t)
			}
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Prompts != nil {
		cursor = ""
		for page := 0; page < maxPages; page++ {
			res, err := cs.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, u.listError(cs, "prompts", err)
			}
			for _, p := range res.Prompts {
				if p != nil && len(l.prompts) < maxListed {
					l.prompts = append(l.prompts, p)
				}
			}
			if cursor = res.NextCursor; cursor == "" {
				break
			}
		}
	}
	slices.SortFunc(l.tools, func(x, y *sdk.Tool) int { return strings.Compare(x.Name, y.Name) })
	slices.SortFunc(l.prompts, func(x, y *sdk.Prompt) int { return strings.Compare(x.Name, y.Name) })
	return l, nil
}

// listError describes a failed listing; a failure other than the
// server's own JSON-RPC error drops the session.
func (u *remote) listError(cs *sdk.ClientSession, what string, err error) error {
	if werr, ok := serverError(err); ok {
		return fmt.Errorf("the MCP server %q refused to list its %s: %s", u.cfg.Name, what, werr.Message)
	}
	u.drop(cs)
	return errors.New(unreachable(u.cfg.Name, err))
}
