package adapterconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on what a SKILL.md's frontmatter may cost to read. The frontmatter comes from
// tenants (ConfigMaps, images) and is parsed by the manager, so a hostile one must not
// cost more than these, whatever its shape. A skill's frontmatter carries a name (64
// characters), a description (1,024) and a little metadata; these leave ample room.
const (
	// MaxFrontmatterBytes bounds the YAML text between the two --- lines.
	MaxFrontmatterBytes = 64 << 10
	// MaxFrontmatterNodes bounds the YAML nodes (keys, values, list items) parsed.
	MaxFrontmatterNodes = 10_000
	// MaxFrontmatterJSON bounds the frontmatter carried as JSON. HTML-escaping in JSON
	// can make one YAML byte six JSON bytes, so it is larger than MaxFrontmatterBytes.
	MaxFrontmatterJSON = 128 << 10
)

// errFrontmatterAlias is the refusal of a YAML anchor or alias. go.yaml.in/yaml/v3 does
// not apply its alias-expansion guard when it decodes into a yaml.Node, so one alias
// per level of a ten-way list grows a 500-byte frontmatter tenfold per level; skills
// have no use for them, so they are refused rather than counted.
var errFrontmatterAlias = errors.New("YAML anchors and aliases are not allowed; write each value out where it is used")

// SkillFrontmatter reads the YAML frontmatter of a SKILL.md (between a first line "---"
// and the next "---") and returns it as a JSON object. It is read with YAML 1.2
// semantics, as the Skills extension's clients read it: yes, no, on and off stay
// strings; timestamps stay the text written, since JSON has no time type. A
// frontmatter with an anchor or an alias, or beyond the bounds above, is refused.
func SkillFrontmatter(skillMD []byte) (json.RawMessage, error) {
	block, err := frontmatterBlock(skillMD)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(block, &doc); err != nil {
		return nil, fmt.Errorf("the frontmatter is not YAML: %w", err)
	}
	if err := checkFrontmatterNodes(&doc); err != nil {
		return nil, fmt.Errorf("SKILL.md frontmatter: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the frontmatter is not a YAML mapping (name: ..., description: ...)")
	}
	v, err := yamlToJSON(doc.Content[0], 0)
	if err != nil {
		return nil, fmt.Errorf("the frontmatter cannot be carried as JSON: %w", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the frontmatter as JSON: %w", err)
	}
	if len(out) > MaxFrontmatterJSON {
		return nil, fmt.Errorf("SKILL.md frontmatter is %d bytes as JSON, more than the %d allowed", len(out), MaxFrontmatterJSON)
	}
	return out, nil
}

// checkFrontmatterNodes walks the parsed tree once, in document order and without
// recursion, before anything is built from it: it refuses anchors and aliases (naming
// the first one's line) and counts the nodes.
func checkFrontmatterNodes(doc *yaml.Node) error {
	pending := []*yaml.Node{doc}
	for count := 0; len(pending) > 0; count++ {
		if count > MaxFrontmatterNodes {
			return fmt.Errorf("more than %d YAML values (keys, values and list items): too large for a skill's frontmatter", MaxFrontmatterNodes)
		}
		n := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			return fmt.Errorf("line %d: %w", n.Line, errFrontmatterAlias)
		}
		for i := len(n.Content) - 1; i >= 0; i-- {
			pending = append(pending, n.Content[i])
		}
	}
	return nil
}

// frontmatterBlock is the text between the opening and closing "---" lines. It reads
// line by line and stops past MaxFrontmatterBytes, so that what it costs does not grow
// with the file (an image skill's SKILL.md may hold 16 MiB).
func frontmatterBlock(md []byte) ([]byte, error) {
	md = bytes.TrimPrefix(md, []byte("\ufeff"))
	first, rest := nextLine(md)
	if !isDelimiter(first) {
		return nil, errors.New("SKILL.md does not start with a YAML frontmatter: its first line must be ---")
	}
	start := len(md) - len(rest)
	for len(rest) > 0 {
		var line []byte
		line, rest = nextLine(rest)
		if isDelimiter(line) {
			end := len(md) - len(rest) - len(line)
			return md[start:end:end], nil
		}
		if len(md)-len(rest)-start > MaxFrontmatterBytes {
			return nil, fmt.Errorf("SKILL.md frontmatter is longer than %d bytes (or has no closing --- line)", MaxFrontmatterBytes)
		}
	}
	return nil, errors.New("SKILL.md's frontmatter has no closing --- line")
}

// nextLine splits off the first line, with its "\n".
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1], b[i+1:]
	}
	return b, nil
}

func isDelimiter(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r\n")) == "---"
}

// maxFrontmatterDepth bounds nesting, so that a hostile SKILL.md cannot make the
// conversion recurse deeply.
const maxFrontmatterDepth = 32

// yamlToJSON converts a YAML node into values encoding/json writes faithfully: numbers
// keep their digits, tags decide the type as YAML 1.2's core schema resolves them.
func yamlToJSON(n *yaml.Node, depth int) (any, error) {
	if depth > maxFrontmatterDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxFrontmatterDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: %w", n.Line, errFrontmatterAlias) // refused before; kept so no path expands one
	case yaml.MappingNode:
		return yamlMapping(n, depth)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlToJSON(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		return yamlScalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func yamlMapping(n *yaml.Node, depth int) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		if key.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a key is not a scalar", key.Line)
		}
		if _, dup := out[key.Value]; dup {
			return nil, fmt.Errorf("line %d: key %q appears twice", key.Line, key.Value)
		}
		v, err := yamlToJSON(n.Content[i+1], depth+1)
		if err != nil {
			return nil, err
		}
		out[key.Value] = v
	}
	return out, nil
}

func yamlScalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int":
		return yaml12Int(n.Value), nil
	case "!!float":
		var f float64
		if !yaml12Float.MatchString(n.Value) || n.Decode(&f) != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return n.Value, nil // .inf, .nan and forms YAML 1.2 does not read as numbers: the text
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	default:
		// !!str, !!timestamp, !!binary and custom tags: the text as written.
		return n.Value, nil
	}
}

// YAML 1.2 core schema forms of numbers. go.yaml.in/yaml/v3 still reads some YAML 1.1
// forms (017 as octal, 1_000); they are read here as YAML 1.2 reads them.
var (
	yaml12Decimal = regexp.MustCompile(`^[-+]?[0-9]+$`)
	yaml12Float   = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
)

// yaml12Int reads an integer as YAML 1.2's core schema does: decimal, 0o octal, 0x hex;
// anything else (or beyond int64) stays the text written.
func yaml12Int(v string) any {
	var i int64
	var err error
	switch {
	case yaml12Decimal.MatchString(v):
		i, err = strconv.ParseInt(v, 10, 64)
	case strings.HasPrefix(v, "0o"):
		i, err = strconv.ParseInt(v[2:], 8, 64)
	case strings.HasPrefix(v, "0x"):
		i, err = strconv.ParseInt(v[2:], 16, 64)
	default:
		return v
	}
	if err != nil {
		return v
	}
	return json.Number(strconv.FormatInt(i, 10))
}
