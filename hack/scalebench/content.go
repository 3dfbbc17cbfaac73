package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// contentSpec is the -content flag: how many of the first servers serve how many MiB of
// agent skills from ConfigMaps, e.g. 100x1,4x64.
type contentSpec []contentGroup

type contentGroup struct{ servers, mib int }

func (c *contentSpec) String() string {
	parts := make([]string, 0, len(*c))
	for _, g := range *c {
		parts = append(parts, fmt.Sprintf("%dx%d", g.servers, g.mib))
	}
	return strings.Join(parts, ",")
}

func (c *contentSpec) Set(value string) error {
	*c = nil
	for _, part := range strings.Split(value, ",") {
		count, mib, ok := strings.Cut(strings.TrimSpace(part), "x")
		servers, err1 := strconv.Atoi(count)
		size, err2 := strconv.Atoi(mib)
		if !ok || err1 != nil || err2 != nil || servers < 1 || size < 1 || size > maxContentMiB {
			return fmt.Errorf("%q is not COUNTxMIB with MIB from 1 to %d", part, maxContentMiB)
		}
		*c = append(*c, contentGroup{servers: servers, mib: size})
	}
	return nil
}

// maxContentMiB is the most one server may serve (adapterconfig.MaxContentBytes), in
// ConfigMaps of contentConfigMapBytes.
const maxContentMiB = 64

// contentConfigMapBytes is the file each content ConfigMap holds besides its SKILL.md:
// just under a MiB, so that the ConfigMap stays under the API server's 1 MiB and 64 of
// them under the 64 MiB a server may serve.
const contentConfigMapBytes = 1<<20 - 1<<10

func (c contentSpec) servers() int {
	n := 0
	for _, g := range c {
		n += g.servers
	}
	return n
}

func (c contentSpec) total() int {
	n := 0
	for _, g := range c {
		n += g.servers * g.mib
	}
	return n
}

// mibOf is how many MiB of content server i serves.
func (c contentSpec) mibOf(i int) int {
	for _, g := range c {
		if i < g.servers {
			return g.mib
		}
		i -= g.servers
	}
	return 0
}

// createContent creates mib content ConfigMaps for ss, each an agent skill with a SKILL.md
// and a file of random bytes (no two alike, so nothing is shared between shards), and
// adds the skills to its spec.
func createContent(ctx context.Context, c client.Client, ss *cantusv1alpha1.SkillServer, mib int) error {
	for j := range mib {
		name := fmt.Sprintf("%s-skill-%d", ss.Name, j)
		skill := fmt.Sprintf("skill-%d", j)
		data := make([]byte, contentConfigMapBytes)
		if _, err := rand.Read(data); err != nil {
			return fmt.Errorf("random content: %w", err)
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: name, Labels: map[string]string{cantusv1alpha1.ContentLabel: "true"}},
			Data:       map[string]string{"SKILL.md": fmt.Sprintf("---\nname: %s\ndescription: Bench content %d of %s.\n---\n# %s\n", skill, j, ss.Name, skill)},
			BinaryData: map[string][]byte{"data.bin": data},
		}
		if err := c.Create(ctx, cm); err != nil {
			return fmt.Errorf("create content ConfigMap %s/%s: %w", ss.Namespace, name, err)
		}
		ss.Spec.AgentSkills = append(ss.Spec.AgentSkills, cantusv1alpha1.AgentSkill{Name: skill, ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: name}})
	}
	return nil
}
