//go:build kubernetes

package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubernetesProbeFailure: a probe pod's reasons that do not pass by
// waiting end the wait with the container, its image and the reason; a
// pod still pulling or being scheduled does not.
func TestKubernetesProbeFailure(t *testing.T) {
	pod := func(st corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "conch-probe-x-listen"}, Status: st}
	}
	waiting := func(name, image, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details"}}}
	}
	for _, c := range []struct {
		st   corev1.PodStatus
		want string
	}{
		{corev1.PodStatus{Phase: corev1.PodPending}, ""},
		{corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("sandbox", "reg/x:1", "ContainerCreating")}}, ""},
		{corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("sandbox", "reg/x:1", "ErrImagePull")}},
			"container sandbox (image reg/x:1) waiting: ErrImagePull: details"},
		{corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{waiting("install-agent", "reg/conch:1", "ImagePullBackOff")}},
			"container install-agent (image reg/conch:1) waiting: ImagePullBackOff"},
		{corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("sandbox", "reg/x:1", "CreateContainerError")}},
			"CreateContainerError"},
		{corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-agent", Image: "reg/conch:1",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "Error", Message: "no /conch"}}}}},
			"container install-agent (image reg/conch:1) exited 127: Error no /conch"},
		{corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active too long"}, "probe pod conch-probe-x-listen failed"},
	} {
		err := probeFailure(pod(c.st))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want none", c.st, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q", c.st, err, c.want)
		}
	}
}
