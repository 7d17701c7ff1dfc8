// Command pause is the real node's sandbox ("pause") image and its test workload, built here
// so that no registry is needed. With no arguments it sleeps until SIGTERM/SIGINT; with
// `serve ADDR` it also answers every HTTP request with "ok <hostname>\n" (the API server ->
// pod path); with `apiserver PATH` it GETs PATH from the API server the way in-cluster clients
// do (the `kubernetes` Service, the service-account token and CA), prints "HTTP <code>" and
// exits (the pod -> API server path).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount/"

func apiserver(path string) int {
	token, err := os.ReadFile(serviceAccount + "token")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ca, err := os.ReadFile(serviceAccount + "ca.crt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	req, _ := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	fmt.Printf("HTTP %d\n", resp.StatusCode)
	return 0
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "apiserver" {
		os.Exit(apiserver(os.Args[2]))
	}
	if len(os.Args) == 3 && os.Args[1] == "serve" {
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "ok %s\n", host)
		})
		go func() {
			if err := http.ListenAndServe(os.Args[2], nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
