package ledgerapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// logRoutes adds the logs listing and usage/me.
func logRoutes(add func(path, scope string, needsDB bool, h handler)) {
	add("/v1/logs", scopeLogs, true, listLogs)
	add("/v1/logs/{id}", scopeLogs, true, getLog)
	add("/v1/usage/me", "", false, usageMe)
}

// logObject is one ledger record as the logs API shows it.
type logObject struct {
	ID string `json:"id"`
	ledger.Record
	CreatedAt string  `json:"created_at"`
	Cost      float64 `json:"cost"`
	CostUSD   string  `json:"cost_usd"`
	LatencyMS float64 `json:"response_time"`
	TTFTMS    float64 `json:"time_to_first_token,omitempty"`
	Object    string  `json:"object"`
}

func toLog(r *ledger.Record) logObject {
	return logObject{ID: strconv.FormatInt(r.ID, 10), Record: *r, CreatedAt: r.Time.Format(time.RFC3339Nano),
		Cost: cents(r.CostNanoUSD), CostUSD: usd(r.CostNanoUSD), LatencyMS: float64(r.Latency.Microseconds()) / 1000,
		TTFTMS: float64(r.TTFT.Microseconds()) / 1000, Object: "log"}
}

// listLogs answers GET /v1/logs: the caller's records, newest first,
// paged by page_size and current_page and filtered as analytics are.
func listLogs(c *call) (any, error) {
	f, err := c.filter(false)
	if err != nil {
		return nil, err
	}
	limit, offset, err := c.page()
	if err != nil {
		return nil, err
	}
	recs, total, capped, err := c.db.Logs(c.r.Context(), f, limit, offset)
	if err != nil {
		return nil, err
	}
	data := make([]logObject, 0, len(recs))
	for i := range recs {
		data = append(data, toLog(&recs[i]))
	}
	out := map[string]any{"object": "list", "total": total, "data": data}
	if capped {
		// total stopped counting at ledger.MaxLogsTotal: there are more.
		out["total_capped"] = true
	}
	return out, nil
}

// getLog answers GET /v1/logs/{id} within the caller's scope: another
// workspace's record is a 404, as a missing one is.
func getLog(c *call) (any, error) {
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, apierror.BadRequest("logId", "must be a log id from GET /v1/logs")
	}
	f, err := c.filter(false)
	if err != nil {
		return nil, err
	}
	f.ID = id
	recs, _, _, err := c.db.Logs(c.r.Context(), f, 1, 0)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, apierror.New(http.StatusNotFound, apierror.TypeNotFound, "no such log").WithCode("log_not_found")
	}
	return toLog(&recs[0]), nil
}

// usagePeriod is the caller's spend over one calendar period (UTC).
type usagePeriod struct {
	From         string  `json:"from"`
	To           string  `json:"to"`
	Requests     int64   `json:"requests"`
	Cost         float64 `json:"cost"`
	CostUSD      string  `json:"cost_usd"`
	CostUnknown  int64   `json:"cost_unknown"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
}

// usageMe answers GET /v1/usage/me: what the calling key spent today and
// this month (UTC calendar periods) from the ledger, when one is
// configured, and where each usage limit on the key stands (used,
// remaining, period). It needs no scope: a key may always see its own
// usage.
func usageMe(c *call) (any, error) {
	out := map[string]any{"object": "usage", "api_key": c.id.Name, "workspace_id": c.id.WorkspaceID,
		"organisation_id": c.id.OrganisationID}
	limits, err := c.app.BudgetEnforcer().Statuses(c.r.Context(), &policies.Attributes{
		WorkspaceID: c.id.WorkspaceID, OrganisationID: c.id.OrganisationID, APIKey: c.id.Name})
	if err != nil {
		return nil, err
	}
	if limits == nil {
		limits = []budgets.Status{}
	}
	out["usage_limits"] = limits
	if c.db == nil {
		return out, nil
	}
	now := time.Now().UTC()
	day := now.Truncate(24 * time.Hour)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []struct {
		name     string
		from, to time.Time
	}{{"day", day, day.Add(24 * time.Hour)}, {"month", month, month.AddDate(0, 1, 0)}} {
		f := &ledger.Filter{Workspace: c.id.WorkspaceID, Organisation: c.id.OrganisationID,
			APIKeys: []string{c.id.Name}, From: p.from, To: p.to}
		_, t, err := c.db.Series(c.r.Context(), f, p.to.Sub(p.from).Truncate(time.Hour))
		if err != nil {
			return nil, err
		}
		out[p.name] = usagePeriod{From: p.from.Format(time.RFC3339), To: p.to.Format(time.RFC3339),
			Requests: t.Requests, Cost: cents(t.CostNanoUSD), CostUSD: usd(t.CostNanoUSD), CostUnknown: t.CostUnknown,
			InputTokens: t.InputTokens, OutputTokens: t.OutputTokens}
	}
	return out, nil
}
