package responses

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// ListQuery is the query of GET /v1/responses/{id}/input_items.
type ListQuery struct {
	Limit int    // 1–100, default 20
	Order string // "asc" or "desc" (default)
	After string // item id to start after
}

// ParseListQuery reads limit, order and after from q, with OpenAI's
// defaults and bounds.
func ParseListQuery(q url.Values) (ListQuery, error) {
	lq := ListQuery{Limit: 20, Order: "desc", After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return lq, apierror.BadRequest("limit", "Invalid 'limit': must be an integer between 1 and 100.")
		}
		lq.Limit = n
	}
	if v := q.Get("order"); v != "" {
		if v != "asc" && v != "desc" {
			return lq, apierror.BadRequest("order", "Invalid 'order': must be 'asc' or 'desc'.")
		}
		lq.Order = v
	}
	return lq, nil
}

// itemList is OpenAI's list shape.
type itemList struct {
	Object  string  `json:"object"`
	Data    []Item  `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// InputItems returns the list body of the input items of id in
// workspace: this turn's input, in q.Order, q.Limit at a time, after the
// item q.After. An unknown id is a 404; an unknown after is a 400.
func (s *Store) InputItems(ctx context.Context, workspace, id string, q ListQuery) ([]byte, error) {
	rec, err := s.lookup(ctx, workspace, id)
	if err != nil {
		return nil, err
	}
	if q.Limit <= 0 || q.Limit > 100 {
		q.Limit = 20
	}
	items := make([]Item, len(rec.Input))
	copy(items, rec.Input)
	if q.Order != "asc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	if q.After != "" {
		at := -1
		for i, it := range items {
			if itemID(it) == q.After {
				at = i
				break
			}
		}
		if at < 0 {
			return nil, apierror.BadRequest("after", "No input item found with id '%s'.", q.After)
		}
		items = items[at+1:]
	}
	list := itemList{Object: "list", Data: items}
	if len(items) > q.Limit {
		list.Data, list.HasMore = items[:q.Limit], true
	}
	if n := len(list.Data); n > 0 {
		first, last := itemID(list.Data[0]), itemID(list.Data[n-1])
		list.FirstID, list.LastID = &first, &last
	}
	if list.Data == nil {
		list.Data = []Item{}
	}
	return json.Marshal(list)
}

func itemID(it Item) string { return gjson.GetBytes(it, "id").String() }

func isReference(it Item) bool {
	return gjson.GetBytes(it, "type").String() == "item_reference"
}
