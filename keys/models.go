package keys

import (
	"encoding/json"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// FilterModelList keeps, in an OpenAI model list answer
// ({"object":"list","data":[{"id":…},…]}), only the models patterns
// allow, so GET /v1/models lists what the caller may use. An answer that
// is not such a list is returned as it is; no patterns keeps everything.
func FilterModelList(body []byte, patterns []string) []byte {
	if len(patterns) == 0 {
		return body
	}
	var list map[string]json.RawMessage
	if json.Unmarshal(body, &list) != nil {
		return body
	}
	var data []json.RawMessage
	if json.Unmarshal(list["data"], &data) != nil {
		return body
	}
	kept := make([]json.RawMessage, 0, len(data))
	for _, m := range data {
		var model struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m, &model) == nil && identity.ModelAllowed(patterns, model.ID) {
			kept = append(kept, m)
		}
	}
	list["data"], _ = json.Marshal(kept)
	out, err := json.Marshal(list)
	if err != nil {
		return body
	}
	return out
}
