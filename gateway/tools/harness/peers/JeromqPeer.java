// A ZMTP 2.0 peer for the interop tests and the matrix: JeroMQ 0.3.x (Debian's libjeromq-java,
// "Based on libzmq 3.2.5, ZMTP/2.0") greets with revision 1 and a socket-type byte.
//
// Run with the single-file launcher (needs a JDK; nothing compiled is committed):
//   java -cp /usr/share/java/jeromq.jar JeromqPeer.java KIND bind|connect ENDPOINT COUNT TIMEOUT_MS [IDENTITY]
//
// KIND: REQ or DEALER (clients: send COUNT requests "req-<i>"; a DEALER sends all of them first,
// with its own empty delimiter frame, then reads the replies), REP or ROUTER (servers: answer
// COUNT requests with the same frames and the body prefixed "re:"; COUNT 0: until killed).
// COUNT -1: driven over stdin (the matrix), one command per line:
//   SEND <hex>,<hex>,...       send these frames, then print the reply (RECV) or TIMEOUT
//   SERVE                      answer every message from now on: same frames, every byte of the
//                              body + 1 (the matrix's responder rule), until stdin closes
// bind with ENDPOINT "tcp://127.0.0.1:0" picks a free port. Output, one line each:
//   BOUND <endpoint>           after a bind
//   RECV <hex>,<hex>,...       every message received, its frames in hex
//   DONE                       COUNT messages handled
//   TIMEOUT                    nothing arrived within TIMEOUT_MS (exit status 3)
import org.zeromq.ZMQ;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public class JeromqPeer {
    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    static List<byte[]> recvMessage(ZMQ.Socket s) {
        byte[] first = s.recv(0);
        if (first == null) {
            return null;
        }
        List<byte[]> frames = new ArrayList<>();
        frames.add(first);
        while (s.hasReceiveMore()) {
            frames.add(s.recv(0));
        }
        StringBuilder line = new StringBuilder("RECV ");
        for (int i = 0; i < frames.size(); i++) {
            line.append(i == 0 ? "" : ",").append(hex(frames.get(i)));
        }
        System.out.println(line);
        System.out.flush();
        return frames;
    }

    static void sendMessage(ZMQ.Socket s, List<byte[]> frames) {
        for (int i = 0; i < frames.size(); i++) {
            s.send(frames.get(i), i < frames.size() - 1 ? ZMQ.SNDMORE : 0);
        }
    }

    static byte[] unhex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static void serveForever(ZMQ.Socket s) {
        while (true) {
            List<byte[]> frames = recvMessage(s);
            if (frames == null) {
                continue;  // the receive timeout: look again
            }
            byte[] body = frames.get(frames.size() - 1);
            byte[] reply = new byte[body.length];
            for (int i = 0; i < body.length; i++) {
                reply[i] = (byte) (body[i] + 1);
            }
            frames.set(frames.size() - 1, reply);
            sendMessage(s, frames);
        }
    }

    static void driven(ZMQ.Socket s) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("SERVE")) {
                s.setReceiveTimeOut(100);
                Thread t = new Thread(() -> serveForever(s));
                t.setDaemon(true);
                t.start();
            } else if (line.startsWith("SEND")) {
                List<byte[]> frames = new ArrayList<>();
                for (String h : line.substring(4).trim().split(",", -1)) {
                    frames.add(unhex(h));
                }
                sendMessage(s, frames);
                if (recvMessage(s) == null) {
                    System.out.println("TIMEOUT");
                    System.out.flush();
                }
            }
        }
        System.exit(0);  // stdin closed: the driver is gone
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: JeromqPeer KIND bind|connect ENDPOINT COUNT TIMEOUT_MS [IDENTITY]");
            System.exit(2);
        }
        String kind = args[0];
        boolean bind = args[1].equals("bind");
        String endpoint = args[2];
        int count = Integer.parseInt(args[3]);
        int timeout = Integer.parseInt(args[4]);
        int type;
        switch (kind) {
            case "REQ": type = ZMQ.REQ; break;
            case "REP": type = ZMQ.REP; break;
            case "DEALER": type = ZMQ.DEALER; break;
            case "ROUTER": type = ZMQ.ROUTER; break;
            default: System.err.println("unknown kind " + kind); System.exit(2); return;
        }
        ZMQ.Context ctx = ZMQ.context(1);
        ZMQ.Socket s = ctx.socket(type);
        s.setLinger(100);
        s.setReceiveTimeOut(timeout);
        s.setSendTimeOut(timeout);
        if (args.length > 5 && !args[5].equals("-")) {
            s.setIdentity(args[5].getBytes(StandardCharsets.UTF_8));
        }
        if (type == ZMQ.ROUTER) {
            s.setRouterMandatory(true);  // a send to a peer not yet connected fails, not vanishes
        }
        if (bind) {
            if (endpoint.endsWith(":0")) {
                String base = endpoint.substring(0, endpoint.length() - 2);
                int port = s.bindToRandomPort(base);
                endpoint = base + ":" + port;
            } else {
                s.bind(endpoint);
            }
            System.out.println("BOUND " + endpoint);
            System.out.flush();
        } else {
            s.connect(endpoint);
        }
        if (count < 0) {
            driven(s);
            return;
        }
        int status = 0;
        boolean client = type == ZMQ.REQ || type == ZMQ.DEALER;
        if (client) {
            List<List<byte[]>> requests = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                List<byte[]> frames = new ArrayList<>();
                if (type == ZMQ.DEALER) {
                    frames.add(new byte[0]);
                }
                frames.add(("req-" + i).getBytes(StandardCharsets.UTF_8));
                requests.add(frames);
            }
            if (type == ZMQ.DEALER) {  // pipelined: every request out before the first reply
                for (List<byte[]> r : requests) {
                    sendMessage(s, r);
                }
                for (int i = 0; i < count && status == 0; i++) {
                    if (recvMessage(s) == null) {
                        status = 3;
                    }
                }
            } else {
                for (List<byte[]> r : requests) {
                    sendMessage(s, r);
                    if (recvMessage(s) == null) {
                        status = 3;
                        break;
                    }
                }
            }
        } else {
            for (int i = 0; count == 0 || i < count; i++) {
                List<byte[]> frames = recvMessage(s);
                if (frames == null) {
                    if (count == 0) {
                        continue;
                    }
                    status = 3;
                    break;
                }
                byte[] body = frames.get(frames.size() - 1);
                byte[] reply = new byte[body.length + 3];
                System.arraycopy("re:".getBytes(StandardCharsets.UTF_8), 0, reply, 0, 3);
                System.arraycopy(body, 0, reply, 3, body.length);
                frames.set(frames.size() - 1, reply);
                sendMessage(s, frames);
            }
        }
        System.out.println(status == 0 ? "DONE" : "TIMEOUT");
        System.out.flush();
        s.close();
        ctx.term();
        System.exit(status);
    }
}
