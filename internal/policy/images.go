package policy

import (
	"strings"

	"github.com/distribution/reference"
)

// imageListed reports whether image is allowed by one of the entries. An entry is a
// registry ("ghcr.io"), a repository prefix ("ghcr.io/acme", "ghcr.io/acme/"), or an
// exact reference with a tag or digest ("ghcr.io/acme/srv:1"). Both sides are normalised
// first ("nginx" is "docker.io/library/nginx"), and a prefix matches only at a path
// boundary: "ghcr.io/acme" allows "ghcr.io/acme/srv" but not "ghcr.io/acme-evil/srv".
func imageListed(entries []string, image string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	repo := named.Name()
	for _, entry := range entries {
		if entryAllows(lowerRegistry(strings.TrimSuffix(strings.TrimSpace(entry), "/")), repo, named.String()) {
			return true
		}
	}
	return false
}

func entryAllows(entry, repo, full string) bool {
	if entry == "" {
		return false
	}
	if isRegistryOnly(entry) {
		return strings.HasPrefix(repo, entry+"/")
	}
	ref, err := reference.ParseNormalizedNamed(entry)
	if err != nil {
		return false
	}
	if _, tagged := ref.(reference.Tagged); tagged {
		return ref.String() == full
	}
	if _, digested := ref.(reference.Digested); digested {
		return ref.String() == full
	}
	return repo == ref.Name() || strings.HasPrefix(repo, ref.Name()+"/")
}

// isRegistryOnly tells "ghcr.io" or "registry.local:5000" (a host, with a dot, a port or
// "localhost") from a Docker Hub repository such as "nginx".
func isRegistryOnly(entry string) bool {
	return !strings.Contains(entry, "/") && (strings.ContainsAny(entry, ".:") || entry == "localhost")
}

// lowerRegistry lowercases the registry host of an entry: host names are not case
// sensitive, and references are compared as strings.
func lowerRegistry(entry string) string {
	host, _, found := strings.Cut(entry, "/")
	if !found || strings.ContainsAny(host, ".:") || host == "localhost" {
		return strings.ToLower(host) + strings.TrimPrefix(entry, host)
	}
	return entry
}
