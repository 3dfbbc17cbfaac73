package tokenservice

import (
	"crypto/subtle"
	"html/template"
	"net/http"
	"net/url"
)

const (
	authorizePath  = "/authorize"
	callbackPath   = authorizePath + "/callback" // the op package's, under the authorization endpoint
	loginPath      = "/login"
	revocationPath = "/oauth/revoke"
	registerPath   = "/register"
)

// loginForm is the service's login page: the form a browser (or Server.Authorize)
// fills in. Its field names are part of the test API: id, username, password.
var loginForm = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><title>Sign in</title></head>
<body>
<h1>Sign in to the test authorization server</h1>
<p>{{.Client}} asks to act as you.</p>
{{if .Error}}<p role="alert">{{.Error}}</p>{{end}}
<form method="post" action="` + loginPath + `">
<input type="hidden" name="id" value="{{.ID}}">
<label>User <input name="username" autocomplete="username"></label>
<label>Password <input type="password" name="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`))

type loginPage struct {
	ID     string
	Client string
	Error  string
}

// login serves the login page (GET) and checks what it was sent (POST). A right
// password completes the auth request and sends the browser to the op package's
// callback, which redirects to the client's redirect_uri with code and state; a wrong
// one shows the page again, with 401.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id := r.Form.Get("id")
	a, err := s.store.AuthRequestByID(r.Context(), id)
	if err != nil {
		http.Error(w, "login: "+err.Error(), http.StatusBadRequest)
		return
	}
	page := loginPage{ID: id, Client: a.GetClientID()}
	switch r.Method {
	case http.MethodGet:
		s.renderLogin(w, http.StatusOK, page)
	case http.MethodPost:
		user := r.PostForm.Get("username")
		if !s.checkPassword(user, r.PostForm.Get("password")) {
			s.countLoginFailure()
			page.Error = "Wrong user or password."
			s.renderLogin(w, http.StatusUnauthorized, page)
			return
		}
		if err := s.completeLogin(id, user); err != nil {
			http.Error(w, "login: "+err.Error(), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, s.issuer+callbackPath+"?id="+url.QueryEscape(id), http.StatusFound)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) renderLogin(w http.ResponseWriter, status int, page loginPage) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginForm.Execute(w, page)
}

func (s *Server) checkPassword(user, password string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, ok := s.users[user]
	return ok && user != "" && subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
}
