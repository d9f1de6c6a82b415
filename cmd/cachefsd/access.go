package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"strconv"
	"strings"

	"github.com/cachefs/cachefs/upstream"
)

// accessFlags are serve's flags on who may connect and what a guest may
// leave on the host.
type accessFlags struct {
	secretFile  string
	insecureTCP bool
	allowCIDs   string
	allowSetID  bool
	allowDevs   bool
}

func (a *accessFlags) register(fl *flag.FlagSet) {
	fl.StringVar(&a.secretFile, "secret-file", "", "file holding the secret every guest must prove it shares (needed for tcp)")
	fl.BoolVar(&a.insecureTCP, "insecure-tcp", false, "serve a tcp address without --secret-file: whoever reaches the port gets the export")
	fl.StringVar(&a.allowCIDs, "allow-cid", "", "vsock: accept connections only from these peer CIDs, comma-separated")
	fl.BoolVar(&a.allowSetID, "allow-setid", false, "apply the set-uid and set-gid bits guests give regular files to the host files")
	fl.BoolVar(&a.allowDevs, "allow-devices", false, "make the device nodes guests make real device nodes on the host (serve as root); else each is an empty file standing for it")
}

// check reads the secret and checks the flags against the address to
// listen on. It returns the secret (nil: none) and the CIDs allowed
// (nil: any).
func (a *accessFlags) check(listen string) ([]byte, []uint32, error) {
	addr, err := upstream.ParseAddr(listen)
	if err != nil {
		return nil, nil, err
	}
	var secret []byte
	if a.secretFile != "" {
		if secret, err = upstream.ReadSecret(a.secretFile); err != nil {
			return nil, nil, err
		}
	}
	if addr.Scheme == "tcp" {
		if secret == nil && !a.insecureTCP {
			return nil, nil, fmt.Errorf("%s: a tcp address needs --secret-file (or --insecure-tcp to serve it to anyone who reaches it)", listen)
		}
		if ip := net.ParseIP(addr.Host); ip != nil && !ip.IsLoopback() || ip == nil && addr.Host != "localhost" {
			log.Printf("cachefsd: %s is not a loopback address: the export is open to the network it reaches", addr.Host)
		}
	}
	if a.allowCIDs == "" {
		return secret, nil, nil
	}
	if addr.Scheme != "vsock" {
		return nil, nil, fmt.Errorf("--allow-cid needs a vsock:// address, not %s", listen)
	}
	cids, err := parseCIDs(a.allowCIDs)
	return secret, cids, err
}

// parseCIDs parses a comma-separated list of vsock context ids.
func parseCIDs(s string) ([]uint32, error) {
	var cids []uint32
	for _, f := range strings.Split(s, ",") {
		cid, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--allow-cid: bad CID %q", f)
		}
		cids = append(cids, uint32(cid))
	}
	return cids, nil
}
