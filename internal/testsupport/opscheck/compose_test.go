package opscheck

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/waitroom/waitroom/internal/config"
)

// Where each waitroom process listens, by the contract (DESIGN.md).
var servicePorts = map[string]string{"gateway": "8080", "booking": "8081", "admitter": "8082"}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string         `yaml:"image"`
	Build       map[string]any `yaml:"build"`
	Command     stringList     `yaml:"command"`
	Environment envMap         `yaml:"environment"`
	Volumes     []string       `yaml:"volumes"`
	Ports       []string       `yaml:"ports"`
	Expose      []string       `yaml:"expose"`
	DependsOn   dependsOn      `yaml:"depends_on"`
	Healthcheck *struct {
		Test stringList `yaml:"test"`
	} `yaml:"healthcheck"`
}

// stringList is a compose list that may also be written as one string.
type stringList []string

func (s *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = strings.Fields(n.Value)
		return nil
	}
	var l []string
	err := n.Decode(&l)
	*s = l
	return err
}

// envMap is compose's environment, as a map or as a list of NAME=value.
type envMap map[string]string

func (e *envMap) UnmarshalYAML(n *yaml.Node) error {
	m, err := listOrMap(n, func(kv string) (string, string) {
		k, v, _ := strings.Cut(kv, "=")
		return k, v
	}, func(v string) string { return v })
	*e = m
	return err
}

// dependsOn is compose's depends_on, as a list or as a map with conditions.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	m, err := listOrMap(n, func(s string) (string, string) { return s, "service_started" },
		func(v dependency) string { return v.Condition })
	*d = m
	return err
}

// dependency is one service of a depends_on written as a map.
type dependency struct {
	Condition string `yaml:"condition"`
}

// listOrMap decodes n, which compose lets be written as a list or as a
// map, into a map: item makes an entry of each string of a list, value a
// value of each entry of a map.
func listOrMap[V any](n *yaml.Node, item func(string) (string, string), value func(V) string) (map[string]string, error) {
	m := map[string]string{}
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return nil, err
		}
		for _, s := range l {
			k, v := item(s)
			m[k] = v
		}
		return m, nil
	}
	var full map[string]V
	if err := n.Decode(&full); err != nil {
		return nil, err
	}
	for k, v := range full {
		m[k] = value(v)
	}
	return m, nil
}

// mount is one entry of a service's volumes.
type mount struct {
	source, target string
	readOnly, bind bool
}

func (s composeService) mounts() []mount {
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		m := mount{source: parts[0]}
		if len(parts) > 1 {
			m.target = parts[1]
		}
		m.readOnly = len(parts) > 2 && slices.Contains(strings.Split(parts[2], ","), "ro")
		m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/")
		out = append(out, m)
	}
	return out
}

// hostPath maps a path inside the container to the repo path (relative to
// the repository root) of the bind mount that provides it, or "" if none.
func (s composeService) hostPath(inside string) (string, mount) {
	var best mount
	for _, m := range s.mounts() {
		if (inside == m.target || strings.HasPrefix(inside, m.target+"/")) && len(m.target) > len(best.target) {
			best = m
		}
	}
	if best.target == "" || !best.bind {
		return "", best
	}
	return path.Join(best.source, strings.TrimPrefix(inside, best.target)), best
}

// containerPorts are the ports a service publishes or exposes, container side.
func (s composeService) containerPorts() []string {
	var out []string
	for _, p := range append(slices.Clone(s.Ports), s.Expose...) {
		parts := strings.Split(p, ":")
		port, _, _ := strings.Cut(parts[len(parts)-1], "/")
		out = append(out, port)
	}
	return out
}

// interpolation: ${NAME:-default}, ${NAME-default}, ${NAME}, $NAME; $$ is a $.
var interp = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate resolves compose variables to their defaults, as on a machine
// with none of them set: the checks see what a plain `docker compose up` gets.
func interpolate(s string) string {
	return interp.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sm := interp.FindStringSubmatch(m)
		return sm[2]
	})
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal([]byte(interpolate(string(readRepoFile(t, "docker-compose.yml")))), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// serviceConfig loads the waitroom config a compose service runs with: the
// file WAITROOM_CONFIG names, read through the service's mounts, with the
// service's environment as overrides, validated as the binary would.
func serviceConfig(t *testing.T, name string, s composeService) *config.Config {
	t.Helper()
	inside := s.Environment["WAITROOM_CONFIG"]
	if inside == "" {
		t.Fatalf("%s: WAITROOM_CONFIG not set", name)
	}
	host, m := s.hostPath(inside)
	if host == "" {
		t.Fatalf("%s: WAITROOM_CONFIG=%s is in no bind mount", name, inside)
	}
	if !m.readOnly {
		t.Errorf("%s: config mount %s is writable; mount it :ro", name, m.target)
	}
	b := readRepoFile(t, host)
	lookup := func(k string) (string, bool) { v, ok := s.Environment[k]; return v, ok }
	c, err := config.Parse(b, lookup)
	if err != nil {
		t.Fatalf("%s: %s with its environment: %v", name, host, err)
	}
	return c
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("%q: %v", rawURL, err)
	}
	return u.Host
}

func addrPort(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return port
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	root := repoRoot(t)
	for _, name := range []string{"redis", "postgres", "migrate", "booking", "admitter", "gateway", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("service %s missing", name)
		}
	}
	binaries := dockerfileBinaries(t)

	t.Run("every mounted file exists and every named volume is declared", func(t *testing.T) {
		for name, s := range c.Services {
			for _, m := range s.mounts() {
				if m.bind {
					if _, err := os.Stat(filepath.Join(root, m.source)); err != nil {
						t.Errorf("%s mounts %s: %v", name, m.source, err)
					}
				} else if _, ok := c.Volumes[m.source]; !ok {
					t.Errorf("%s uses volume %s, not declared under volumes:", name, m.source)
				}
			}
			for dep := range s.DependsOn {
				if _, ok := c.Services[dep]; !ok {
					t.Errorf("%s depends on unknown service %s", name, dep)
				}
			}
		}
	})

	t.Run("redis keeps an append-only file on a volume", func(t *testing.T) {
		r := c.Services["redis"]
		if !strings.HasPrefix(r.Image, "redis:7") {
			t.Errorf("redis image %q; want redis:7", r.Image)
		}
		cmd := strings.Join(r.Command, " ")
		for _, want := range []string{"--appendonly yes", "--appendfsync everysec"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("redis command %q lacks %q", cmd, want)
			}
		}
		if !hasVolumeAt(r, "/data") {
			t.Error("redis /data is not on a named volume")
		}
		if r.Healthcheck == nil {
			t.Error("redis has no healthcheck (the services wait for it)")
		}
	})

	t.Run("postgres keeps its data on a volume", func(t *testing.T) {
		p := c.Services["postgres"]
		if !strings.HasPrefix(p.Image, "postgres:15") {
			t.Errorf("postgres image %q; want postgres:15", p.Image)
		}
		if !hasVolumeAt(p, "/var/lib/postgresql/data") {
			t.Error("postgres data is not on a named volume")
		}
		if p.Healthcheck == nil {
			t.Error("postgres has no healthcheck (migrate waits for it)")
		}
	})

	cfgs := map[string]*config.Config{}
	for _, name := range []string{"migrate", "booking", "admitter", "gateway"} {
		s := c.Services[name]
		t.Run(name+" runs a binary of the Dockerfile with a valid config", func(t *testing.T) {
			if ctx, _ := s.Build["context"].(string); ctx != "." {
				t.Errorf("build context %q; want . (the one Dockerfile)", ctx)
			}
			if df, _ := s.Build["dockerfile"].(string); df != "" && df != "Dockerfile" {
				t.Errorf("dockerfile %q; want Dockerfile", df)
			}
			if len(s.Command) == 0 {
				t.Fatal("no command: the image has no fixed entrypoint")
			}
			cmd := strings.Join(s.Command, " ")
			if !slices.ContainsFunc(binaries, func(b string) bool { return strings.HasPrefix(cmd, b) || strings.Contains(cmd, "-c "+b) }) {
				t.Errorf("command %q runs none of the built binaries %q", cmd, binaries)
			}
			cfgs[name] = serviceConfig(t, name, s)
		})
	}
	if len(cfgs) != 4 {
		t.Fatal("cannot check how the services meet without all four configs")
	}
	pg := c.Services["postgres"].Environment

	for name, cfg := range cfgs {
		t.Run(name+" finds redis and postgres by service name", func(t *testing.T) {
			if got := hostPort(t, cfg.Redis.URL); got != "redis:6379" {
				t.Errorf("redis at %q; want redis:6379", got)
			}
			u, err := url.Parse(cfg.Postgres.URL)
			if err != nil {
				t.Fatal(err)
			}
			if u.Host != "postgres:5432" {
				t.Errorf("postgres at %q; want postgres:5432", u.Host)
			}
			pass, _ := u.User.Password()
			if got, want := fmt.Sprintf("%s:%s%s", u.User.Username(), pass, u.Path),
				fmt.Sprintf("%s:%s/%s", pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]); got != want {
				t.Errorf("postgres user:password/db %q; the postgres service makes %q", got, want)
			}
		})
	}

	t.Run("ports agree with the configs and the contract", func(t *testing.T) {
		listen := map[string]string{
			"gateway":  addrPort(t, cfgs["gateway"].Gateway.Addr),
			"booking":  addrPort(t, cfgs["booking"].Booking.Addr),
			"admitter": addrPort(t, cfgs["admitter"].Admitter.Addr),
		}
		for name, want := range servicePorts {
			if listen[name] != want {
				t.Errorf("%s listens on %s; want %s", name, listen[name], want)
			}
			if ports := c.Services[name].containerPorts(); !slices.Contains(ports, want) {
				t.Errorf("%s publishes/exposes %q; want %s", name, ports, want)
			}
		}
		if got, want := cfgs["gateway"].Gateway.BookingURL, "http://booking:"+listen["booking"]; got != want {
			t.Errorf("gateway finds booking at %q; want %q", got, want)
		}
		if got, want := cfgs["booking"].Booking.JWKSURL, "http://gateway:"+listen["gateway"]+"/.well-known/jwks.json"; got != want {
			t.Errorf("booking fetches the JWKS from %q; want %q", got, want)
		}
		// Only the gateway is a way in: booking publishes nothing but the
		// payment simulator's page, on a listener of its own.
		sim := cfgs["booking"].Booking.Payment.Simulator
		for _, p := range c.Services["booking"].Ports {
			if sim.Addr == "" || !strings.HasSuffix(p, ":"+addrPort(t, sim.Addr)) || strings.HasSuffix(p, ":"+listen["booking"]) {
				t.Errorf("booking publishes %q: the gateway must be the only way in (the simulator's page, on booking.payment.simulator.addr, may be published)", p)
			}
		}
		if sim.Addr != "" && !strings.HasSuffix(sim.PageURL, ":"+addrPort(t, sim.Addr)) {
			t.Errorf("the simulator's page_url %q is not on its listener %q", sim.PageURL, sim.Addr)
		}
	})

	t.Run("secrets agree across the processes", func(t *testing.T) {
		g := cfgs["gateway"]
		for name, cfg := range cfgs {
			if cfg.Auth.TicketSecret != g.Auth.TicketSecret || cfg.Booking.Payment.Secret != g.Booking.Payment.Secret {
				t.Errorf("%s has other ticket/payment secrets than the gateway", name)
			}
		}
	})

	t.Run("migrate migrates then seeds before booking starts", func(t *testing.T) {
		cmd := strings.Join(c.Services["migrate"].Command, " ")
		i, j := strings.Index(cmd, "booking migrate"), strings.Index(cmd, "booking seed")
		if i < 0 || j < i || !strings.Contains(cmd[i:j], "&&") {
			t.Errorf("migrate command %q; want booking migrate && booking seed", cmd)
		}
		if cond := c.Services["booking"].DependsOn["migrate"]; cond != "service_completed_successfully" {
			t.Errorf("booking waits for migrate with %q; want service_completed_successfully", cond)
		}
		if cond := c.Services["migrate"].DependsOn["postgres"]; cond != "service_healthy" {
			t.Errorf("migrate waits for postgres with %q; want service_healthy", cond)
		}
	})

	t.Run("the gateway signing key is on a shared volume that something fills", func(t *testing.T) {
		key := cfgs["gateway"].Auth.SigningKeyFile
		g := c.Services["gateway"]
		if host, m := g.hostPath(key); host != "" || m.target == "" {
			t.Fatalf("gateway signing key %s: mount %+v; want a named volume", key, m)
		}
		_, gm := g.hostPath(key)
		var makers []string
		for name, s := range c.Services {
			if _, m := s.hostPath(key); m.source == gm.source && !m.readOnly && strings.Contains(strings.Join(s.Command, " "), key) {
				makers = append(makers, name)
			}
		}
		if len(makers) == 0 {
			t.Errorf("no service writes %s to volume %s", key, gm.source)
		}
		for _, m := range makers {
			if c.Services["gateway"].DependsOn[m] != "service_completed_successfully" {
				t.Errorf("gateway does not wait for %s to make its key", m)
			}
		}
	})

	t.Run("prometheus scrapes the three processes and loads the alerts", func(t *testing.T) {
		p := c.Services["prometheus"]
		if !strings.HasPrefix(p.Image, "prom/prometheus") {
			t.Errorf("prometheus image %q", p.Image)
		}
		inside := "/etc/prometheus/prometheus.yml"
		for _, a := range p.Command {
			if v, ok := strings.CutPrefix(a, "--config.file="); ok {
				inside = v
			}
		}
		host, _ := p.hostPath(inside)
		if host != "configs/prometheus.yml" {
			t.Fatalf("prometheus reads %s = repo %q; want configs/prometheus.yml", inside, host)
		}
		var pc struct {
			RuleFiles     []string `yaml:"rule_files"`
			ScrapeConfigs []struct {
				JobName       string `yaml:"job_name"`
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"scrape_configs"`
		}
		if err := yaml.Unmarshal(readRepoFile(t, host), &pc); err != nil {
			t.Fatal(err)
		}
		targets := map[string][]string{}
		for _, sc := range pc.ScrapeConfigs {
			for _, st := range sc.StaticConfigs {
				targets[sc.JobName] = append(targets[sc.JobName], st.Targets...)
			}
		}
		for name, port := range servicePorts {
			if want := []string{name + ":" + port}; !slices.Equal(targets[name], want) {
				t.Errorf("job %s scrapes %q; want %q", name, targets[name], want)
			}
		}
		var rules []string
		for _, rf := range pc.RuleFiles {
			h, _ := p.hostPath(path.Join(path.Dir(inside), rf))
			rules = append(rules, h)
		}
		if !slices.Contains(rules, "configs/alerts.yml") {
			t.Errorf("prometheus loads rules %q (in the repo); want configs/alerts.yml among them", rules)
		}
	})

	t.Run("grafana provisions the datasource and the dashboards", func(t *testing.T) {
		g := c.Services["grafana"]
		prov, _ := g.hostPath("/etc/grafana/provisioning")
		if prov != "configs/grafana/provisioning" {
			t.Fatalf("grafana provisioning from %q; want configs/grafana/provisioning", prov)
		}
		var ds struct {
			Datasources []struct {
				Type string `yaml:"type"`
				URL  string `yaml:"url"`
			} `yaml:"datasources"`
		}
		if err := yaml.Unmarshal(readRepoFile(t, prov+"/datasources/prometheus.yml"), &ds); err != nil {
			t.Fatal(err)
		}
		if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
			t.Errorf("datasources %+v; want one prometheus at http://prometheus:9090", ds.Datasources)
		}
		var dp struct {
			Providers []struct {
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		if err := yaml.Unmarshal(readRepoFile(t, prov+"/dashboards/waitroom.yml"), &dp); err != nil {
			t.Fatal(err)
		}
		if len(dp.Providers) != 1 {
			t.Fatalf("dashboard providers %+v; want one", dp.Providers)
		}
		if host, _ := g.hostPath(dp.Providers[0].Options.Path); host != "dashboards" {
			t.Errorf("dashboards provisioned from %s = repo %q; want dashboards", dp.Providers[0].Options.Path, host)
		}
		if home := g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
			host, _ := g.hostPath(home)
			if _, err := os.Stat(filepath.Join(root, host)); host == "" || err != nil {
				t.Errorf("home dashboard %s is not a repo file (%q)", home, host)
			}
		}
	})
}

func hasVolumeAt(s composeService, target string) bool {
	for _, m := range s.mounts() {
		if m.target == target && !m.bind {
			return true
		}
	}
	return false
}
