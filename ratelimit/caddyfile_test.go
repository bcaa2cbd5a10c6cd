package ratelimit

import (
	"reflect"
	"time"

	"github.com/caddyserver/caddy/v2"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    *Handler
		wantErr string
	}{
		{name: "bare", input: `llm_ratelimit`, want: &Handler{}},
		{name: "empty block", input: `llm_ratelimit {
		}`, want: &Handler{}},
		{name: "full", input: `llm_ratelimit {
			max_request_body 1MiB
			policy per-key {
				type requests
				unit rpm
				value 60
				condition workspace_id 11111111-1111-4111-8111-111111111111
				condition metadata._user *
				group_by api_key metadata._user
			}
			policy tokens-per-model {
				type tokens
				unit rpd
				value 1e6
				group_by model
			}
		}`, want: &Handler{MaxRequestBody: 1 << 20, Policies: []*StaticPolicy{
			{Name: "per-key", Type: "requests", Unit: "rpm", Value: 60,
				Conditions: []policies.Condition{{Key: "workspace_id", Value: "11111111-1111-4111-8111-111111111111"}, {Key: "metadata._user", Value: "*"}},
				GroupBy:    []policies.GroupBy{{Key: "api_key"}, {Key: "metadata._user"}}},
			{Name: "tokens-per-model", Type: "tokens", Unit: "rpd", Value: 1e6, GroupBy: []policies.GroupBy{{Key: "model"}}},
		}}},
		{name: "reservation lease", input: `llm_ratelimit {
			reservation_lease 2m
		}`, want: &Handler{ReservationLease: caddy.Duration(2 * time.Minute)}},
		{name: "reservation lease too short", input: `llm_ratelimit {
			reservation_lease 100ms
		}`, wantErr: "reservation_lease"},
		{name: "argument", input: `llm_ratelimit foo`, wantErr: "wrong argument count"},
		{name: "unknown option", input: `llm_ratelimit {
			zone x
		}`, wantErr: `unknown llm_ratelimit option "zone"`},
		{name: "bad size", input: `llm_ratelimit {
			max_request_body lots
		}`, wantErr: "max_request_body"},
		{name: "policy without name", input: `llm_ratelimit {
			policy {
			}
		}`, wantErr: "wrong argument count"},
		{name: "missing value", input: `llm_ratelimit {
			policy p {
				type requests
				unit rpm
			}
		}`, wantErr: `policy "p": value is required`},
		{name: "bad type", input: `llm_ratelimit {
			policy p {
				type dollars
				unit rpm
				value 1
			}
		}`, wantErr: "type: must be one of requests, tokens, cost"},
		{name: "missing type", input: `llm_ratelimit {
			policy p {
				unit rpm
				value 1
			}
		}`, wantErr: "type: is required"},
		{name: "bad unit", input: `llm_ratelimit {
			policy p {
				type requests
				unit rps
				value 1
			}
		}`, wantErr: "unit: must be one of rpm, rph, rpd"},
		{name: "zero value", input: `llm_ratelimit {
			policy p {
				type requests
				unit rpm
				value 0
			}
		}`, wantErr: "value must be a number greater than 0"},
		{name: "text value", input: `llm_ratelimit {
			policy p {
				value ten
			}
		}`, wantErr: "value must be a number greater than 0"},
		{name: "unknown condition key", input: `llm_ratelimit {
			policy p {
				type requests
				unit rpm
				value 1
				condition user alice
			}
		}`, wantErr: "conditions[0].key: must be one of"},
		{name: "condition needs a value", input: `llm_ratelimit {
			policy p {
				condition api_key
			}
		}`, wantErr: "wrong argument count"},
		{name: "empty group_by", input: `llm_ratelimit {
			policy p {
				group_by
			}
		}`, wantErr: "wrong argument count"},
		{name: "duplicate group_by", input: `llm_ratelimit {
			policy p {
				type requests
				unit rpm
				value 1
				group_by api_key api_key
			}
		}`, wantErr: "duplicates an earlier group_by key"},
		{name: "unknown policy option", input: `llm_ratelimit {
			policy p {
				burst 3
			}
		}`, wantErr: `policy "p": unknown option "burst"`},
		{name: "duplicate policy", input: `llm_ratelimit {
			policy p {
				type requests
				unit rpm
				value 1
			}
			policy p {
				type requests
				unit rpm
				value 2
			}
		}`, wantErr: `policy "p" is declared twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := new(Handler)
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h, tt.want) {
				t.Fatalf("got %+v, want %+v", h, tt.want)
			}
		})
	}
}

// TestStaticDefaults checks what a Caddyfile policy without conditions or
// group_by enforces.
func TestStaticDefaults(t *testing.T) {
	p, err := (&StaticPolicy{Name: "n", Type: "tokens", Unit: "rph", Value: 10}).policy()
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != StaticID("n") || p.Status != policies.StatusActive || p.OrganisationID != "" ||
		!reflect.DeepEqual(p.Conditions, []policies.Condition{{Key: "api_key", Value: "*"}}) ||
		!reflect.DeepEqual(p.GroupBy, []policies.GroupBy{{Key: "api_key"}}) {
		t.Fatalf("%+v", p)
	}
	if _, err := buildStatic([]*StaticPolicy{{Name: "a", Type: "requests", Unit: "rpm", Value: 1}, {Name: "a", Type: "requests", Unit: "rpm", Value: 1}}); err == nil {
		t.Fatal("duplicate names accepted")
	}
}
