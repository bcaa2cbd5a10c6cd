package cost

// The built-in catalog, prices.json, is generated from the genai-prices
// database (Pydantic's, published as the npm package
// @pydantic/genai-prices; the version is pinned here and recorded in the
// file's "_source"). Regenerating needs npm, node and the npm registry:
//
//	go generate ./cost
//
// then review the diff (one line per model) and commit prices.json. CI
// does not regenerate; it tests the committed file. To move to a newer
// database, raise -version.
//go:generate go run ./internal/gencatalog -version 0.1.8 -out prices.json
