package sandboxd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProbeGreeting is what a probe listener answers each connection with.
const ProbeGreeting = "conch-probe"

// ProbeListen is `conch sandbox-probe listen PORT`, run by `conch doctor`
// in its probe pods on Kubernetes: it prints "addrs" and the pod's
// addresses but loopback, then "listening", and greets every connection
// with ProbeGreeting until stdin ends (the exec that started it closed) or
// 15 minutes passed.
func ProbeListen(ctx context.Context, port int, stdin io.Reader, out io.Writer) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintln(out, "addrs", strings.Join(podAddrs(), ","))
	fmt.Fprintln(out, "listening")
	if f, ok := out.(*os.File); ok {
		_ = f.Sync()
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, ProbeGreeting+"\n")
		c.Close()
	}
}

// podAddrs are the addresses of every interface but loopback.
func podAddrs() []string {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// ProbeDial is `conch sandbox-probe dial HOST:PORT`: nil when a probe
// listener's greeting was read within timeout.
func ProbeDial(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("connected, no greeting: %w", err)
	}
	if strings.TrimSpace(line) != ProbeGreeting {
		return errors.New("connected, but another program answered")
	}
	return nil
}
