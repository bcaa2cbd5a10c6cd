package policies

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	testOrg = "7f1b3a52-6a0e-4c61-9b55-0d3a1c2e4f60"
	testWS  = "ws-main"
)

func validBody() *Policy {
	return &Policy{
		Type:       TypeRequests,
		Unit:       UnitRPM,
		Value:      100,
		Conditions: []Condition{{Key: KeyAPIKey, Value: "*"}},
		GroupBy:    []GroupBy{{Key: KeyAPIKey}},
	}
}

func TestPolicyWindowAndLimit(t *testing.T) {
	cases := []struct {
		unit  string
		value float64
		win   time.Duration
		limit int64
	}{
		{UnitRPM, 100, time.Minute, 100},
		{UnitRPH, 2.9, time.Hour, 2},
		{UnitRPD, 0.5, 24 * time.Hour, 1},
		{"rps", 1e20, 0, int64(MaxValue)},
		{UnitRPM, math.NaN(), time.Minute, 1},
	}
	for _, c := range cases {
		p := &Policy{Unit: c.unit, Value: c.value}
		if got := p.Window(); got != c.win {
			t.Errorf("unit %q: Window = %v, want %v", c.unit, got, c.win)
		}
		if got := p.Limit(); got != c.limit {
			t.Errorf("value %v: Limit = %d, want %d", c.value, got, c.limit)
		}
	}
	// Cost policies count micro-dollars.
	for _, c := range []struct {
		usd   float64
		limit int64
	}{{1, 1_000_000}, {0.25, 250_000}, {1e15, int64(MaxValue)}} {
		p := &Policy{Type: TypeCost, Unit: UnitRPD, Value: c.usd}
		if got := p.Limit(); got != c.limit {
			t.Errorf("cost %v: Limit = %d, want %d", c.usd, got, c.limit)
		}
	}
}

func TestValidateBody(t *testing.T) {
	long := strings.Repeat("é", MaxNameLength+1)
	cases := []struct {
		name  string
		edit  func(p *Policy)
		field string // "" means valid
	}{
		{"valid", func(p *Policy) {}, ""},
		{"valid tokens rpd with metadata and name", func(p *Policy) {
			p.Type, p.Unit, p.Name = TypeTokens, UnitRPD, strp(strings.Repeat("é", MaxNameLength))
			p.Conditions = []Condition{{Key: "metadata._user", Value: "alice"}, {Key: KeyModel, Value: "gpt-4o"}}
			p.GroupBy = []GroupBy{{Key: "metadata.team"}, {Key: KeyWorkspaceID}}
		}, ""},
		{"valid fractional value", func(p *Policy) { p.Value = 0.5 }, ""},
		{"missing type", func(p *Policy) { p.Type = "" }, "type"},
		{"bad type", func(p *Policy) { p.Type = "dollars" }, "type"},
		{"missing unit", func(p *Policy) { p.Unit = "" }, "unit"},
		{"bad unit", func(p *Policy) { p.Unit = "rps" }, "unit"},
		{"zero value", func(p *Policy) { p.Value = 0 }, "value"},
		{"negative value", func(p *Policy) { p.Value = -1 }, "value"},
		{"NaN value", func(p *Policy) { p.Value = math.NaN() }, "value"},
		{"infinite value", func(p *Policy) { p.Value = math.Inf(1) }, "value"},
		{"huge value", func(p *Policy) { p.Value = 2e15 }, "value"},
		{"name too long", func(p *Policy) { p.Name = &long }, "name"},
		{"organisation not a UUID", func(p *Policy) { p.OrganisationID = "acme" }, "organisation_id"},
		{"no conditions", func(p *Policy) { p.Conditions = nil }, "conditions"},
		{"empty condition key", func(p *Policy) { p.Conditions[0].Key = "" }, "conditions[0].key"},
		{"unknown condition key", func(p *Policy) {
			p.Conditions = append(p.Conditions, Condition{Key: "user", Value: "x"})
		}, "conditions[1].key"},
		{"bare metadata key", func(p *Policy) { p.Conditions[0].Key = "metadata." }, "conditions[0].key"},
		{"empty condition value", func(p *Policy) { p.Conditions[0].Value = "" }, "conditions[0].value"},
		{"no group_by", func(p *Policy) { p.GroupBy = []GroupBy{} }, "group_by"},
		{"unknown group_by key", func(p *Policy) { p.GroupBy[0].Key = "ip" }, "group_by[0].key"},
		{"duplicate group_by key", func(p *Policy) {
			p.GroupBy = []GroupBy{{Key: KeyModel}, {Key: KeyModel}}
		}, "group_by[1].key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := validBody()
			c.edit(p)
			err := p.ValidateBody()
			checkFieldError(t, err, c.field)
		})
	}
}

func checkFieldError(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want *FieldError for %q", err, field)
	}
	if fe.Field != field {
		t.Fatalf("error names field %q (%v), want %q", fe.Field, fe, field)
	}
	if !strings.HasPrefix(fe.Error(), field+": ") || fe.Message == "" {
		t.Fatalf("error text %q does not name the field", fe.Error())
	}
}

func TestValidateRecord(t *testing.T) {
	record := func() *Policy {
		p := validBody()
		p.ID = "0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f"
		p.Status = StatusActive
		p.WorkspaceID, p.OrganisationID = testWS, testOrg
		return p
	}
	cases := []struct {
		name  string
		edit  func(p *Policy)
		field string
	}{
		{"valid", func(p *Policy) {}, ""},
		{"archived", func(p *Policy) { p.Status = StatusArchived }, ""},
		{"missing id", func(p *Policy) { p.ID = "" }, "id"},
		{"id not canonical", func(p *Policy) { p.ID = "{" + p.ID + "}" }, "id"},
		{"id path", func(p *Policy) { p.ID = "../../etc/passwd" }, "id"},
		{"bad status", func(p *Policy) { p.Status = "deleted" }, "status"},
		{"missing workspace", func(p *Policy) { p.WorkspaceID = "" }, "workspace_id"},
		{"missing organisation", func(p *Policy) { p.OrganisationID = "" }, "organisation_id"},
		{"body errors too", func(p *Policy) { p.Unit = "x" }, "unit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := record()
			c.edit(p)
			checkFieldError(t, p.Validate(), c.field)
		})
	}
}

func TestParseCreate(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		field string
	}{
		{"valid", `{"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}],
			"type":"tokens","unit":"rph","value":1000,"name":null,"id":"ignored","status":"archived","extra":1}`, ""},
		{"value as string", `{"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}],
			"type":"tokens","unit":"rph","value":"1000"}`, "value"},
		{"condition value as number", `{"conditions":[{"key":"api_key","value":5}],"group_by":[{"key":"api_key"}],
			"type":"tokens","unit":"rph","value":1}`, "conditions.value"},
		{"conditions not an array", `{"conditions":{},"group_by":[{"key":"api_key"}],"type":"tokens","unit":"rph","value":1}`, "conditions"},
		{"missing value", `{"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}],
			"type":"tokens","unit":"rph"}`, "value"},
		{"missing group_by", `{"conditions":[{"key":"api_key","value":"*"}],"type":"tokens","unit":"rph","value":1}`, "group_by"},
		{"not JSON", `{"conditions":`, "body"},
		{"not an object", `[1]`, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseCreate([]byte(c.body))
			checkFieldError(t, err, c.field)
			if c.field == "" {
				if p.ID != "" || p.Status != "" || p.Value != 1000 || p.Type != TypeTokens {
					t.Fatalf("ParseCreate took server fields or lost body fields: %+v", p)
				}
			}
		})
	}
}

func TestPolicyJSON(t *testing.T) {
	p := validBody()
	p.ID, p.Status, p.WorkspaceID, p.OrganisationID = "0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f", StatusActive, testWS, testOrg
	p.CreatedAt = time.Date(2026, 2, 3, 4, 5, 6, 7e6, time.UTC)
	p.LastUpdatedAt = p.CreatedAt
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "type", "unit", "value", "status", "workspace_id", "organisation_id",
		"created_at", "last_updated_at", "name", "conditions", "group_by"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %q missing from %s", k, data)
		}
	}
	if m["name"] != nil {
		t.Errorf("nil name should be JSON null, got %v", m["name"])
	}
	if _, ok := m["object"]; ok {
		t.Errorf("object set on a stored record: %s", data)
	}
	if m["created_at"] != "2026-02-03T04:05:06.007Z" {
		t.Errorf("created_at = %v, want RFC 3339", m["created_at"])
	}
	c := p.Clone()
	c.Conditions[0].Value = "changed"
	c.GroupBy[0].Key = "changed"
	if p.Conditions[0].Value == "changed" || p.GroupBy[0].Key == "changed" {
		t.Fatal("Clone shares slices")
	}
}
