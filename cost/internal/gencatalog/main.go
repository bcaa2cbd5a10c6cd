// Command gencatalog writes the gateway's built-in price catalog
// (cost/prices.json) from the genai-prices database maintained by
// Pydantic (https://github.com/pydantic/genai-prices), as published in
// its npm package @pydantic/genai-prices.
//
// It is run by `go generate ./cost` (see cost/generate.go), which needs
// npm and node and the npm registry; CI does not run it, and the
// generated file is committed. Steps:
//
//  1. `npm pack @pydantic/genai-prices@<version>` into a temporary
//     directory (or -package names a downloaded .tgz);
//  2. node imports the package and prints, through its public
//     findProvider API, the providers the gateway supports as JSON;
//  3. the models' token prices in force on -as-of are written in
//     LiteLLM's model-price format, under every name their match rule
//     spells out, with the package version recorded in "_source";
//  4. the written file is parsed by the cost package and every entry
//     looked up, so a file the gateway would misread is never written.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// npmPackage is the database's npm package.
const npmPackage = "@pydantic/genai-prices"

// maxFile bounds what is read from the package archive (its dist/index.js
// is about 2 MB).
const maxFile = 64 << 20

func main() {
	version := flag.String("version", "", "version of "+npmPackage+" to read (required, so the catalog is reproducible)")
	out := flag.String("out", "prices.json", "file to write")
	pkg := flag.String("package", "", "an already downloaded package .tgz (skips npm pack)")
	asOf := flag.String("as-of", time.Now().UTC().Format(time.DateOnly), "the day whose prices are taken (YYYY-MM-DD)")
	flag.Parse()
	if *version == "" {
		log.Fatal("gencatalog: -version is required")
	}
	if _, err := time.Parse(time.DateOnly, *asOf); err != nil {
		log.Fatalf("gencatalog: -as-of: %v", err)
	}
	if err := run(*version, *pkg, *out, *asOf); err != nil {
		log.Fatalf("gencatalog: %v", err)
	}
}

func run(version, pkg, out, asOf string) error {
	dir, err := os.MkdirTemp("", "gencatalog")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if pkg == "" {
		if pkg, err = npmPack(version, dir); err != nil {
			return err
		}
	}
	index, err := unpack(pkg, version, dir)
	if err != nil {
		return err
	}
	providers, err := dump(index)
	if err != nil {
		return err
	}
	entries, err := convert(providers, asOf)
	if err != nil {
		return err
	}
	data := render(entries, version, asOf)
	if err := verify(data, entries); err != nil {
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	log.Printf("gencatalog: %s: %d entries, %d bytes, from %s@%s", out, len(entries), len(data), npmPackage, version)
	return nil
}

// npmPack downloads the package archive into dir with npm's own client.
func npmPack(version, dir string) (string, error) {
	cmd := exec.Command("npm", "pack", npmPackage+"@"+version, "--pack-destination", dir, "--silent")
	cmd.Stderr = os.Stderr
	name, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("npm pack %s@%s: %w", npmPackage, version, err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(name))), nil
}

// unpack extracts package.json and dist/index.js from the archive into
// dir, checks the version is the one asked for, and returns the path of
// index.js.
func unpack(tgz, version, dir string) (string, error) {
	f, err := os.Open(tgz)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tgz, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", tgz, err)
		}
		if h.Name != "package/package.json" && h.Name != "package/dist/index.js" {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxFile+1))
		if err != nil {
			return "", err
		}
		if len(b) > maxFile {
			return "", fmt.Errorf("%s: %s larger than %d bytes", tgz, h.Name, maxFile)
		}
		files[h.Name] = b
	}
	var meta struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(files["package/package.json"], &meta); err != nil {
		return "", fmt.Errorf("%s: package.json: %w", tgz, err)
	}
	if meta.Name != npmPackage || meta.Version != version {
		return "", fmt.Errorf("%s holds %s@%s, not %s@%s", tgz, meta.Name, meta.Version, npmPackage, version)
	}
	index := filepath.Join(dir, "index.mjs")
	if len(files["package/dist/index.js"]) == 0 {
		return "", fmt.Errorf("%s: no dist/index.js", tgz)
	}
	return index, os.WriteFile(index, files["package/dist/index.js"], 0o600)
}

// dumpScript prints the providers named in argv[2] (a JSON list) through
// the package's public findProvider API, so the generator does not depend
// on how the package lays out its data.
const dumpScript = `
import { pathToFileURL } from "node:url";
const m = await import(pathToFileURL(process.argv[1]).href);
const out = JSON.parse(process.argv[2]).map((id) => {
  const p = m.findProvider({ providerId: id });
  if (!p) throw new Error("the database has no provider " + id);
  return p;
});
process.stdout.write(JSON.stringify(out));
`

// dump runs node on the package's module and decodes its providers.
func dump(index string) ([]dbProvider, error) {
	ids, _ := json.Marshal(providerIDs())
	cmd := exec.Command("node", "--input-type=module", "-e", dumpScript, index, string(ids))
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var providers []dbProvider
	if err := json.Unmarshal(raw, &providers); err != nil {
		return nil, fmt.Errorf("node output: %w", err)
	}
	return providers, nil
}

// render writes the catalog, one entry a line in key order, so that a
// regeneration's diff shows exactly the prices that changed.
func render(entries map[string]entry, version, asOf string) []byte {
	var b bytes.Buffer
	str := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"_about\": %s,\n", str("Prices shipped with caddy-llm-gateway, in LiteLLM's model-price format (US dollars per token). GENERATED by `go generate ./cost` (cost/internal/gencatalog) from the genai-prices database; do not edit: override or extend with a price_catalog file. Standard prices in force on as_of: base tier of long-context tiers, no batch or off-peak discounts, 5-minute cache writes."))
	fmt.Fprintf(&b, "  \"_source\": %s,\n", str(npmPackage+"@"+version+" (npm), https://github.com/pydantic/genai-prices"))
	fmt.Fprintf(&b, "  \"_generated\": %s", str(asOf))
	for _, k := range sortedKeys(entries) {
		e := entries[k]
		fmt.Fprintf(&b, ",\n  %s: {\"litellm_provider\": %s", str(k), str(e.Provider))
		for _, p := range e.Prices {
			fmt.Fprintf(&b, ", %s: %s", str(p[0]), p[1])
		}
		fmt.Fprintf(&b, ", \"source\": %s, \"as_of\": %s}", str(e.Source), str(e.AsOf))
	}
	b.WriteString("\n}\n")
	return b.Bytes()
}
