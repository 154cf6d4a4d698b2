//go:build kubernetes

package kubernetes

import (
	"context"
	"fmt"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Access is one permission the backend needs in its namespace.
type Access struct {
	Group, Resource, Subresource, Verb string
}

func (a Access) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r += "." + a.Group
	}
	return a.Verb + " " + r
}

// Needed is every permission the backend uses (deploy/kubernetes/role.yaml
// grants exactly these).
var Needed = []Access{
	{"", "pods", "", "get"}, {"", "pods", "", "list"}, {"", "pods", "", "watch"},
	{"", "pods", "", "create"}, {"", "pods", "", "delete"}, {"", "pods", "", "patch"},
	{"", "pods", "exec", "create"}, {"", "pods", "exec", "get"},
	{"", "persistentvolumeclaims", "", "get"}, {"", "persistentvolumeclaims", "", "list"},
	{"", "persistentvolumeclaims", "", "create"}, {"", "persistentvolumeclaims", "", "delete"},
	{"", "persistentvolumeclaims", "", "patch"},
	{"networking.k8s.io", "networkpolicies", "", "get"}, {"networking.k8s.io", "networkpolicies", "", "create"},
	{"networking.k8s.io", "networkpolicies", "", "update"},
	{"metrics.k8s.io", "pods", "", "get"},
}

// CheckAccess asks the API server (SelfSubjectAccessReview) whether this
// client may do everything in Needed in the namespace, and names what it
// may not.
func CheckAccess(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	rc, err := RESTConfig(o)
	if err != nil {
		return err
	}
	cs, err := newClientset(rc)
	if err != nil {
		return err
	}
	var missing []string
	for _, a := range Needed {
		res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: o.Namespace, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Verb: a.Verb}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: access review: %w", err)
		}
		if !res.Status.Allowed {
			missing = append(missing, a.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not allowed in namespace %s: %s (apply deploy/kubernetes/role.yaml and bind it to conch's identity)",
			o.Namespace, strings.Join(missing, ", "))
	}
	return nil
}
