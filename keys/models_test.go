package keys

import "testing"

func TestFilterModelList(t *testing.T) {
	in := `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model"},{"id":"o3","object":"model"}]}`
	if got := string(FilterModelList([]byte(in), []string{"gpt-4o*"})); got != `{"data":[{"id":"gpt-4o-mini","object":"model"}],"object":"list"}` {
		t.Fatalf("filtered: %s", got)
	}
	for _, body := range []string{"not json", `{"data":5}`, `[]`} {
		if got := string(FilterModelList([]byte(body), []string{"x"})); got != body {
			t.Errorf("%s changed to %s", body, got)
		}
	}
}
