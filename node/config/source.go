package config

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cast"
	"github.com/spf13/viper"
)

type source struct {
	v    *viper.Viper
	from map[string]string // key -> description of where it came from
	file string            // the config file read, if any
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s source) where(key string) string {
	if f, ok := s.from[key]; ok {
		return f
	}
	return "default"
}

func (s source) fail(key, msg, fix string) error {
	k, _ := keyByName(key)
	if fix == "" {
		fix = "set " + key
	}
	if k.Name != "" {
		fix += fmt.Sprintf(" (flag --%s, env %s)", k.Flag(), k.Env())
	}
	return &Error{Key: key, Source: s.where(key), Msg: msg, Fix: fix}
}

func (s source) str(key string) (string, error) {
	v, err := cast.ToStringE(s.v.Get(key))
	if err != nil {
		return "", s.fail(key, fmt.Sprintf("%v is not a string", s.v.Get(key)), "")
	}
	return strings.TrimSpace(v), nil
}

func (s source) dur(key string, min, max time.Duration) (time.Duration, error) {
	raw := s.v.Get(key)
	var d time.Duration
	var err error
	switch x := raw.(type) {
	case string:
		d, err = time.ParseDuration(strings.TrimSpace(x))
	case time.Duration:
		d = x
	default:
		err = fmt.Errorf("not a duration")
	}
	if err != nil {
		return 0, s.fail(key, fmt.Sprintf("%q is not a duration", fmt.Sprint(raw)), fmt.Sprintf("write it like \"500ms\" or \"5s\", between %s and %s", min, max))
	}
	if d < min || d > max {
		return 0, s.fail(key, fmt.Sprintf("%s is out of range", d), fmt.Sprintf("use a value between %s and %s", min, max))
	}
	return d, nil
}

func (s source) integer(key string, min, max int) (int, error) {
	raw := s.v.Get(key)
	var i int
	var err error
	if str, ok := raw.(string); ok {
		i, err = strconv.Atoi(strings.TrimSpace(str))
	} else {
		i, err = cast.ToIntE(raw)
	}
	if err != nil {
		return 0, s.fail(key, fmt.Sprintf("%q is not an integer", fmt.Sprint(raw)), fmt.Sprintf("use a whole number between %d and %d", min, max))
	}
	if i < min || i > max {
		return 0, s.fail(key, fmt.Sprintf("%d is out of range", i), fmt.Sprintf("use a whole number between %d and %d", min, max))
	}
	return i, nil
}

// durKey and integerKey read a key within its range from the Keys table.
func (s source) durKey(key string) (time.Duration, error) {
	k, _ := keyByName(key)
	return s.dur(key, time.Duration(k.Min), time.Duration(k.Max))
}

func (s source) integerKey(key string) (int, error) {
	k, _ := keyByName(key)
	return s.integer(key, int(k.Min), int(k.Max))
}

func (s source) boolean(key string) (bool, error) {
	b, err := cast.ToBoolE(s.v.Get(key))
	if err != nil {
		return false, s.fail(key, fmt.Sprintf("%q is not a boolean", fmt.Sprint(s.v.Get(key))), "use true or false")
	}
	return b, nil
}

func (s source) list(key string) ([]string, error) {
	raw := s.v.Get(key)
	if str, ok := raw.(string); ok {
		return splitList(str), nil
	}
	l, err := cast.ToStringSliceE(raw)
	if err != nil {
		return nil, s.fail(key, fmt.Sprintf("%v is not a list of strings", raw), "write a list such as [\"127.0.0.1:7072\"]")
	}
	var out []string
	for _, e := range l {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

var nodeIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// CheckAddr validates a host:port listen address. The host must be an IP
// literal or "localhost"; allowZero permits port 0 (kernel-chosen).
func CheckAddr(addr string, allowZero bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q is not an IP address", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number between 0 and 65535", port)
	}
	if p == 0 && !allowZero {
		return fmt.Errorf("port 0 cannot be advertised to peers")
	}
	return nil
}

func (s source) addr(key string, allowZero bool) (string, error) {
	a, err := s.str(key)
	if err != nil {
		return "", err
	}
	if err := CheckAddr(a, allowZero); err != nil {
		fix := "use host:port with an IP address and a port between 1 and 65535"
		if allowZero {
			fix = "use host:port with an IP address and a port between 0 and 65535"
		}
		return "", s.fail(key, err.Error(), fix)
	}
	return a, nil
}
