//go:build kubernetes

package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// The resource metrics API (metrics.k8s.io, served by metrics-server or
// another adapter through the API server's aggregation layer) gives each
// container's CPU and memory use. A cluster without it answers 404 for the
// group: the use is then unknown (-1), never 0. Whether the group is
// served is asked once and kept metricsRecheck long, so an adapter
// installed later is found without a restart and a cluster without one is
// not asked on every stats call.
const metricsRecheck = 5 * time.Minute

// metricsGroupVersion is the API group version of PodMetrics.
var metricsGroupVersion = metricsv1beta1.SchemeGroupVersion.String()

// usage is one container's use; ok false means unknown.
type usage struct {
	CPUPercent  float64 // of one CPU
	MemoryBytes int64   // working set
	ok          bool
}

// metricsReader reads PodMetrics, remembering whether the API is served.
type metricsReader struct {
	disco discovery.DiscoveryInterface
	mc    metricsclient.Interface
	ns    string
	now   func() time.Time

	mu        sync.Mutex
	checked   time.Time // when served was last learned
	served    bool
	lookedFor int // discovery requests made (tests)
}

func newMetricsReader(rc *rest.Config, disco discovery.DiscoveryInterface, ns string, now func() time.Time) (*metricsReader, error) {
	mc, err := metricsclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	return &metricsReader{disco: disco, mc: mc, ns: ns, now: now}, nil
}

// available says whether the cluster serves PodMetrics, asking discovery
// at most once per metricsRecheck. An error other than "not found" is
// returned (and asked again next time).
func (m *metricsReader) available() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.checked.IsZero() && m.now().Sub(m.checked) < metricsRecheck {
		return m.served, nil
	}
	m.lookedFor++
	list, err := m.disco.ServerResourcesForGroupVersion(metricsGroupVersion)
	switch {
	case apierrors.IsNotFound(err):
		m.served = false
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", metricsGroupVersion, err)
	default:
		m.served = false
		for _, r := range list.APIResources {
			if r.Name == "pods" {
				m.served = true
			}
		}
	}
	m.checked = m.now()
	return m.served, nil
}

// container returns the use of the pod's container: unknown when the API
// is not served or has no sample of the pod yet (a new pod).
func (m *metricsReader) container(ctx context.Context, pod, container string) (usage, error) {
	ok, err := m.available()
	if err != nil || !ok {
		return usage{}, err
	}
	pm, err := m.mc.MetricsV1beta1().PodMetricses(m.ns).Get(ctx, pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return usage{}, nil
	case err != nil:
		return usage{}, fmt.Errorf("read the metrics of %s: %w", pod, err)
	}
	return containerUsage(pm, container), nil
}

// containerUsage decodes one container's CPU (cores, as a quantity such
// as "3174939n") and memory (working set, "11864Ki") from a PodMetrics.
func containerUsage(pm *metricsv1beta1.PodMetrics, container string) usage {
	for _, c := range pm.Containers {
		if c.Name != container {
			continue
		}
		cpu, hasCPU := c.Usage["cpu"]
		mem, hasMem := c.Usage["memory"]
		if !hasCPU || !hasMem {
			return usage{}
		}
		return usage{CPUPercent: float64(cpu.ScaledValue(-9)) / 1e7, MemoryBytes: mem.Value(), ok: true}
	}
	return usage{}
}
