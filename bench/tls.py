#!/usr/bin/env python3
"""bench/tls.py: Debian's nginx terminating TLS in front of `stepq mock`,
for the benchmarks (the same setup as tests/support/tlsenv.c).

    python3 bench/tls.py DIR UPSTREAM_PORT [--http2]

makes a throwaway CA and certificates in DIR (scripts/tls-certs.sh), plus
DIR/bundle.pem (the system's CAs and the throwaway one: what a client that
trusts it system-wide parses), starts nginx (TLS 1.3, HTTP/1.1, one worker
process; with --http2 also HTTP/2, offered by ALPN) proxying to
127.0.0.1:UPSTREAM_PORT, prints `listening 127.0.0.1:PORT` and serves until
interrupted. nginx logs each request's connection and protocol to
DIR/access.log (buffered; nginx_conns reads it). bench/worker.py --tls
imports make_certs, start_nginx and nginx_conns from here.

The listening socket is bound here (port 0) and handed to nginx through its
NGINX variable, as its binary upgrade does: no fixed port, and connections
made before nginx is up wait in the backlog.
"""

import os
import signal
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CERTS = os.path.join(HERE, "..", "scripts", "tls-certs.sh")
SYSTEM_CAS = "/etc/ssl/certs/ca-certificates.crt"

CONF = """{user}daemon off;
worker_processes 1;
worker_rlimit_nofile 40000;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log error;
events {{ worker_connections 16000; }}
http {{
  log_format conn '$connection $server_protocol';
  access_log {d}/access.log conn buffer=256k;
  client_body_temp_path {d}/t-body;
  proxy_temp_path {d}/t-proxy;
  fastcgi_temp_path {d}/t-fcgi;
  uwsgi_temp_path {d}/t-uwsgi;
  scgi_temp_path {d}/t-scgi;
  keepalive_requests 1000000;
  ssl_protocols TLSv1.3;
  ssl_certificate {d}/server.pem;
  ssl_certificate_key {d}/server.key;
  upstream mock {{ server 127.0.0.1:{up}; keepalive 1024; }}
  server {{
    listen 127.0.0.1:{port} ssl{h2} backlog=8192;
    location / {{
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""


def make_certs(folder):
    """Writes the CA, server and client certificates and bundle.pem into
    folder; returns the path of bundle.pem."""
    subprocess.run(["sh", CERTS, folder], check=True,
                   stdout=subprocess.DEVNULL)
    bundle = os.path.join(folder, "bundle.pem")
    with open(bundle, "wb") as out:
        for src in (SYSTEM_CAS, os.path.join(folder, "ca.pem")):
            with open(src, "rb") as f:
                out.write(f.read())
    return bundle


def start_nginx(folder, upstream_port, http2=False):
    """Starts nginx on a fresh port in front of upstream_port, with its
    files in folder (make_certs first), offering HTTP/2 too with http2;
    returns (process, port)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(8192)
    port = s.getsockname()[1]
    conf = os.path.join(folder, "nginx.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(user="user root;\n" if os.geteuid() == 0 else "",
                            d=folder, up=upstream_port, port=port,
                            h2=" http2" if http2 else ""))
    env = dict(os.environ, NGINX="%d;" % s.fileno())
    p = subprocess.Popen(
        ["nginx", "-p", folder, "-c", conf,
         "-e", os.path.join(folder, "nginx-error.log")],
        env=env, pass_fds=[s.fileno()])
    s.close()
    return p, port


def stop_nginx(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)


def nginx_conns(folder):
    """Reads folder/access.log of a stopped nginx: (connections, requests,
    {protocol: requests})."""
    conns, reqs, protos = set(), 0, {}
    with open(os.path.join(folder, "access.log")) as f:
        for line in f:
            conn, proto = line.split()
            conns.add(conn)
            reqs += 1
            protos[proto] = protos.get(proto, 0) + 1
    return len(conns), reqs, protos


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--http2"]):
        sys.exit(__doc__.split("\n\n")[1])
    folder = os.path.abspath(sys.argv[1])
    make_certs(folder)
    p, port = start_nginx(folder, int(sys.argv[2]), len(sys.argv) == 4)
    print("listening 127.0.0.1:%d" % port, flush=True)
    try:
        p.wait()
    except KeyboardInterrupt:
        stop_nginx(p)


if __name__ == "__main__":
    main()
