// Command controller runs the cert-manager controllers queuectl's install needs (the
// self-signed and CA issuers, Certificates end to end, the built-in approver) as one local
// process against a kubeconfig. cert-manager's own command lives in a nested Go module that the
// module proxy does not serve, so this wires the published library packages
// (github.com/cert-manager/cert-manager/pkg/...) the same way: one ContextFactory, each
// registered controller constructed from it, then the shared informers started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to manage")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuer secrets")
	workers := flag.Int("workers", 5, "workers per controller")
	flag.Parse()
	logf.InitLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *clusterNS, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Minute,
			CertificateRequestMaximumBackoffDuration: time.Hour,
		},
		SchedulerOptions: controllerpkg.SchedulerOptions{MaxConcurrentChallenges: 60},
	})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(controllerpkg.Known()))
	for name := range controllerpkg.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	loops := make([]controllerpkg.Interface, 0, len(names))
	for _, name := range names {
		loop, err := controllerpkg.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("constructing %s: %w", name, err)
		}
		loops = append(loops, loop)
	}
	// Informers are registered while the controllers are constructed; start them after.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	fmt.Fprintf(os.Stderr, "cert-manager controller: running %v\n", names)

	var wg sync.WaitGroup
	errs := make(chan error, len(loops))
	for i, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", names[i], err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
