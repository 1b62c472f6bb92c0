// A ZMTP 2.0 peer for the interop tests and the matrix: JeroMQ 0.3.x (Debian's libjeromq-java,
// "Based on libzmq 3.2.5, ZMTP/2.0") greets with revision 1 and a socket-type byte.
//
// Run with the single-file launcher (needs a JDK; nothing compiled is committed):
//   java -cp /usr/share/java/jeromq.jar JeromqPeer.java KIND bind|connect ENDPOINT COUNT TIMEOUT_MS [IDENTITY]
//
// KIND: REQ or DEALER (clients: send COUNT requests "req-<i>"; a DEALER sends all of them first,
// with its own empty delimiter frame, then reads the replies), REP or ROUTER (servers: answer
// COUNT requests with the same frames and the body prefixed "re:"; COUNT 0: until killed).
// bind with ENDPOINT "tcp://127.0.0.1:0" picks a free port. Output, one line each:
//   BOUND <endpoint>           after a bind
//   RECV <hex>,<hex>,...       every message received, its frames in hex
//   DONE                       COUNT messages handled
//   TIMEOUT                    nothing arrived within TIMEOUT_MS (exit status 3)
import org.zeromq.ZMQ;

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

    public static void main(String[] args) {
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
        if (args.length > 5) {
            s.setIdentity(args[5].getBytes(StandardCharsets.UTF_8));
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
