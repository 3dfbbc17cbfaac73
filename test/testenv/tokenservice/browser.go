package tokenservice

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
)

// ErrLoginRefused is what Authorize and Login return when the login page refuses the
// user or password.
var ErrLoginRefused = errors.New("the login page refused the user or password")

// BrowserClient is an HTTP client that behaves like a browser for Authorize and Login:
// it keeps cookies and trusts the service's certificate plus the given PEM
// certificates (a callback or connect URL served over HTTPS by a test CA).
func (s *Server) BrowserClient(extraCAs ...[]byte) *http.Client {
	pool := x509.NewCertPool()
	if cert := s.srv.Certificate(); cert != nil {
		pool.AddCert(cert)
	}
	for _, pem := range extraCAs {
		pool.AppendCertsFromPEM(pem)
	}
	jar, _ := cookiejar.New(nil)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: transport, Jar: jar}
}

// Authorize opens authorizeURL as a browser would (a connect URL that redirects to the
// service's authorization endpoint, or that endpoint itself), signs in at the login
// page as user with password, and follows redirects until the one that leaves the
// service for the client's redirect_uri. It returns that redirect_uri, with code and
// state (or error and error_description, with an error), without opening it. client
// nil means BrowserClient().
func (s *Server) Authorize(ctx context.Context, client *http.Client, authorizeURL, user, password string) (*url.URL, error) {
	browser, left := s.stopOnLeaving(client)
	resp, err := get(ctx, browser, authorizeURL)
	if err != nil {
		return nil, err
	}
	if *left == nil {
		resp, err = s.submitLogin(ctx, browser, resp, user, password)
		if err != nil {
			return nil, err
		}
	}
	drain(resp)
	if *left == nil {
		return nil, fmt.Errorf("authorize: the service answered %d and did not redirect to the client", resp.StatusCode)
	}
	if e := (*left).Query().Get("error"); e != "" {
		return *left, fmt.Errorf("authorize: redirected with error %s: %s", e, (*left).Query().Get("error_description"))
	}
	return *left, nil
}

// Login does what Authorize does, then opens the client's redirect_uri too, with the
// same client (cookies included), following its redirects; it returns that last
// response, whose body the caller closes. An error redirect is opened as well: the
// client's callback is what reports it.
func (s *Server) Login(ctx context.Context, client *http.Client, authorizeURL, user, password string) (*http.Response, error) {
	if client == nil {
		client = s.BrowserClient()
	}
	callback, err := s.Authorize(ctx, client, authorizeURL, user, password)
	if callback == nil {
		return nil, err
	}
	return get(ctx, withJar(client), callback.String())
}

// stopOnLeaving copies client so that it keeps cookies and stops at a redirect from the
// service to elsewhere, which it records in *left.
func (s *Server) stopOnLeaving(client *http.Client) (*http.Client, **url.URL) {
	if client == nil {
		client = s.BrowserClient()
	}
	browser := withJar(client)
	left := new(*url.URL)
	service, _ := url.Parse(s.issuer)
	browser.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if sameOrigin(via[len(via)-1].URL, service) && !sameOrigin(req.URL, service) {
			*left = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}
	return browser, left
}

func withJar(client *http.Client) *http.Client {
	c := *client
	if c.Jar == nil {
		c.Jar, _ = cookiejar.New(nil)
	}
	return &c
}

func sameOrigin(a, b *url.URL) bool { return a.Scheme == b.Scheme && a.Host == b.Host }

var (
	formAction = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	formID     = regexp.MustCompile(`<input type="hidden" name="id" value="([^"]+)">`)
)

// submitLogin fills in the login page resp holds and posts it.
func (s *Server) submitLogin(ctx context.Context, browser *http.Client, page *http.Response, user, password string) (*http.Response, error) {
	defer drain(page)
	body, err := io.ReadAll(io.LimitReader(page.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("login page: %w", err)
	}
	action, id := formAction.FindSubmatch(body), formID.FindSubmatch(body)
	if page.StatusCode != http.StatusOK || action == nil || id == nil {
		return nil, fmt.Errorf("authorize: no login page (status %d): %.300s", page.StatusCode, body)
	}
	target, err := page.Request.URL.Parse(string(action[1]))
	if err != nil {
		return nil, fmt.Errorf("login form action: %w", err)
	}
	form := url.Values{"id": {string(id[1])}, "username": {user}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := browser.Do(req)
	if err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		drain(resp)
		return nil, ErrLoginRefused
	}
	return resp, nil
}

func get(ctx context.Context, client *http.Client, target string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", target, err)
	}
	return resp, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}
