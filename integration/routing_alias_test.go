package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestModelAliases: a plain OpenAI client (no gateway routing header)
// asking for an alias model is routed by the alias's config, a saved one
// or one inline; /v1/models lists the aliases and, for a key with an
// allow-list, only the aliases and models it may use; a model that is no
// alias still needs routing headers.
func TestModelAliases(t *testing.T) {
	a, b := newFakeOpenAI(t), newFakeOpenAI(t)
	group := fmt.Sprintf(`{"strategy":{"mode":"loadbalance"},"targets":[`+
		`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q,"override_params":{"model":"gpt-4o-mini"}},`+
		`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q,"override_params":{"model":"gpt-4o-mini"}}]}`, a.URL, a.URL)
	inline := fmt.Sprintf(`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q,"override_params":{"model":"gpt-4.1"}}`, b.URL)
	llm := "config team-group `" + group + "`\n\t\tmodel team-default {\n\t\t\tconfig team-group\n\t\t}\n\t\tmodel long-context {\n\t\t\tconfig `" + inline + "`\n\t\t}"
	s := newKeysSite(t, llm)
	s.load(t)

	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(gatewayKey),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	ctx := context.Background()
	for _, tt := range []struct {
		alias string
		up    *fakeOpenAI
		model string
	}{{"team-default", a, "gpt-4o-mini"}, {"long-context", b, "gpt-4.1"}} {
		before := tt.up.count()
		resp, err := client.Chat.Completions.New(ctx, chatParams(tt.alias))
		if err != nil {
			t.Fatalf("%s: %v", tt.alias, err)
		}
		if resp.Choices[0].Message.Content == "" || tt.up.count() != before+1 {
			t.Fatalf("%s: the alias's target saw %d requests", tt.alias, tt.up.count()-before)
		}
		var sent struct{ Model string }
		_ = json.Unmarshal(tt.up.last().Body, &sent)
		if sent.Model != tt.model {
			t.Fatalf("%s: upstream got model %q, want %q", tt.alias, sent.Model, tt.model)
		}
	}

	list := func(key string) []string {
		t.Helper()
		c := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := list(gatewayKey); !slices.Equal(got, []string{"long-context", "team-default"}) {
		t.Fatalf("models of an unrestricted key: %v", got)
	}

	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"alias-only","workspace_id":"`+keysWorkspace+
		`","scopes":["completions.write"],"allowed_models":["team-*","gpt-4o-mini"]}`, 200, &created)
	if got := list(created.Key); !slices.Equal(got, []string{"team-default", "gpt-4o-mini"}) {
		t.Fatalf("models of a key allowed team-* and gpt-4o-mini: %v", got)
	}
	restricted := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(created.Key), option.WithMaxRetries(0))
	if _, err := restricted.Chat.Completions.New(ctx, chatParams("team-default")); err != nil {
		t.Fatalf("an allowed alias: %v", err)
	}
	var apiErr *openai.Error
	if _, err := restricted.Chat.Completions.New(ctx, chatParams("long-context")); !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Fatalf("an alias the key may not use: %v", err)
	}

	// A model that is no alias, without routing headers, is the usual 400.
	if _, err := client.Chat.Completions.New(ctx, chatParams("gpt-4o")); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("no alias, no routing: %v", err)
	}
}
