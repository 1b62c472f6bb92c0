-- ZMTP 3.x (ZeroMQ's wire protocol, rfc.zeromq.org specs 23 and 37) for Wireshark and tshark.
-- Shipped with zmq-sp-gateway; install by copying this one file to your personal Lua plugins
-- folder (Wireshark: Help > About > Folders; e.g. ~/.local/lib/wireshark/plugins/), or load it
-- once: tshark -X lua_script:zmtp.lua -r capture.pcapng
--
-- Finds ZMTP on any TCP port by its greeting (0xFF, 8 bytes, 0x7F), then decodes that
-- stream: the 64-byte greeting (version, mechanism, as-server), commands (READY with its
-- properties, PING, PONG, ERROR, SUBSCRIBE, CANCEL, ...) and message frames with their MORE
-- and LONG flags. Each message is one tree item: its envelope (the frames up to and including
-- the empty delimiter) and its body. A preference lists ports to decode without a greeting.

local zmtp = Proto("zmtp", "ZeroMQ Message Transport Protocol")

local f = zmtp.fields
f.signature = ProtoField.bytes("zmtp.signature", "Signature")
f.version = ProtoField.string("zmtp.version", "Version")
f.mechanism = ProtoField.string("zmtp.mechanism", "Mechanism")
f.as_server = ProtoField.bool("zmtp.as_server", "As server")
f.flags = ProtoField.uint8("zmtp.flags", "Flags", base.HEX)
f.more = ProtoField.bool("zmtp.flags.more", "MORE", 8, nil, 0x01)
f.long = ProtoField.bool("zmtp.flags.long", "LONG", 8, nil, 0x02)
f.cmd_flag = ProtoField.bool("zmtp.flags.command", "COMMAND", 8, nil, 0x04)
f.size = ProtoField.uint64("zmtp.size", "Size")
f.command = ProtoField.string("zmtp.command", "Command")
f.prop_name = ProtoField.string("zmtp.property.name", "Property")
f.prop_value = ProtoField.bytes("zmtp.property.value", "Value")
f.socket_type = ProtoField.string("zmtp.socket_type", "Socket-Type")
f.message = ProtoField.none("zmtp.message", "Message")
f.frames = ProtoField.uint32("zmtp.frames", "Frames")
f.envelope = ProtoField.bytes("zmtp.envelope", "Envelope frame")
f.delimiter = ProtoField.none("zmtp.delimiter", "Delimiter (empty frame)")
f.body = ProtoField.bytes("zmtp.body", "Body frame")
f.body_text = ProtoField.string("zmtp.body_text", "Body (text)")

zmtp.prefs.ports = Pref.range("TCP ports", "", "Also decode these TCP ports as ZMTP", 65535)

local function printable(tvb)
  local s = tvb:raw()
  if s:match("^[%g ]*$") then return s end
  return nil
end

local function hexs(tvb)
  if tvb:len() == 0 then return "''" end
  local s = printable(tvb)
  if s then return '"' .. s .. '"' end
  return "0x" .. tvb:bytes():tohex():lower()
end

-- one PDU at offset: returns its length, or -needed (bytes missing), or nil (not ZMTP)
local function pdu_length(buf, offset)
  local left = buf:len() - offset
  if left < 2 then return -(2 - left) end
  local b0 = buf(offset, 1):uint()
  if b0 == 0xFF then  -- a greeting
    if left < 10 then return -(10 - left) end
    if buf(offset + 9, 1):uint() % 2 ~= 1 then return nil end
    return 64
  end
  if b0 > 0x07 then return nil end
  if bit32.band(b0, 0x02) ~= 0 then
    if left < 9 then return -(9 - left) end
    return 9 + buf(offset + 1, 8):uint64():tonumber()
  end
  return 2 + buf(offset + 1, 1):uint()
end

local message_state = {}  -- per stream and direction: frames of a message in progress

local function dissect_greeting(buf, tree)
  local t = tree:add(zmtp, buf(), "ZMTP greeting")
  t:add(f.signature, buf(0, 10))
  if buf:len() >= 64 then
    t:add(f.version, buf(10, 2), string.format("%d.%d", buf(10, 1):uint(), buf(11, 1):uint()))
    local mech = buf(12, 20):stringz()
    t:add(f.mechanism, buf(12, 20), mech)
    t:add(f.as_server, buf(32, 1))
    return "Greeting " .. string.format("%d.%d", buf(10, 1):uint(), buf(11, 1):uint()) .. " " .. mech
  end
  return "Greeting"
end

local function dissect_command(body, t)
  local n = body(0, 1):uint()
  local name = body(1, n):string()
  t:add(f.command, body(0, n + 1), name)
  local pos = 1 + n
  local summary = name
  if name == "READY" then
    while pos + 5 <= body:len() do
      local ln = body(pos, 1):uint()
      local pname = body(pos + 1, ln):string()
      local vlen = body(pos + 1 + ln, 4):uint()
      local vtb = body(pos + 5 + ln, vlen)
      local pt = t:add(f.prop_name, body(pos, 5 + ln + vlen), pname)
      if vlen > 0 then pt:add(f.prop_value, vtb) end
      if pname:lower() == "socket-type" then
        t:add(f.socket_type, vtb, vtb:string())
        summary = summary .. " " .. vtb:string()
      end
      pos = pos + 5 + ln + vlen
    end
  end
  return summary
end

local function dissect_frame(buf, pinfo, tree, key)
  local flags = buf(0, 1):uint()
  local hdr = (bit32.band(flags, 0x02) ~= 0) and 9 or 2
  local size = buf:len() - hdr
  local body = buf(hdr, size):tvb()
  if bit32.band(flags, 0x04) ~= 0 then
    local t = tree:add(zmtp, buf(), "ZMTP command")
    t:add(f.flags, buf(0, 1)):add(f.cmd_flag, buf(0, 1))
    t:add(f.size, buf(1, hdr - 1), UInt64(size))
    return dissect_command(body, t)
  end
  local st = message_state[key]
  if st == nil then
    st = { frames = {}, start = 0 }
    message_state[key] = st
  end
  table.insert(st.frames, { buf = buf, hdr = hdr, body = body, flags = flags })
  if bit32.band(flags, 0x01) ~= 0 then return nil end  -- MORE: the message goes on
  -- the last frame: the whole message
  local frames = st.frames
  message_state[key] = nil
  local delim = 0
  for i, fr in ipairs(frames) do
    if fr.body:len() == 0 then delim = i; break end
  end
  local t = tree:add(f.message, buf())
  t:set_text(string.format("ZMTP message, %d frame(s)", #frames))
  t:add(f.frames, buf(0, 1), #frames):set_generated()
  local env, bodies = {}, {}
  for i, fr in ipairs(frames) do
    local ft = t:add(zmtp, fr.buf(), string.format("Frame %d: %d byte(s)%s", i, fr.body:len(),
      bit32.band(fr.flags, 0x01) ~= 0 and " MORE" or ""))
    ft:add(f.flags, fr.buf(0, 1)):add(f.more, fr.buf(0, 1))
    ft:add(f.size, fr.buf(1, fr.hdr - 1), UInt64(fr.body:len()))
    if i < delim then
      ft:add(f.envelope, fr.body:range())
      table.insert(env, hexs(fr.body))
    elseif i == delim then
      ft:add(f.delimiter, fr.buf())
      table.insert(env, "''")
    else
      if fr.body:len() > 0 then
        ft:add(f.body, fr.body:range())
        local s = printable(fr.body)
        if s then ft:add(f.body_text, fr.body:range(), s) end
      end
      table.insert(bodies, hexs(fr.body))
    end
  end
  local summary = ""
  if delim > 0 then summary = "envelope [" .. table.concat(env, ", ") .. "] " end
  return summary .. "body [" .. table.concat(bodies, ", ") .. "]"
end

function zmtp.dissector(buf, pinfo, tree)
  local offset, total = 0, buf:len()
  local infos = {}
  local key = tostring(pinfo.src) .. ":" .. tostring(pinfo.src_port) .. ">" .. tostring(pinfo.dst_port)
  while offset < total do
    local n = pdu_length(buf, offset)
    if n == nil then return 0 end
    if n < 0 or offset + n > total then  -- the rest comes in the next segment(s)
      pinfo.desegment_offset = offset
      pinfo.desegment_len = (n < 0) and DESEGMENT_ONE_MORE_SEGMENT or (offset + n - total)
      return total
    end
    local pdu = buf(offset, n):tvb()
    local info
    if pdu(0, 1):uint() == 0xFF then
      info = dissect_greeting(pdu, tree)
    else
      info = dissect_frame(pdu, pinfo, tree, key)
    end
    if info then table.insert(infos, info) end
    offset = offset + n
  end
  pinfo.cols.protocol = "ZMTP"
  if #infos > 0 then pinfo.cols.info = table.concat(infos, "; ") end
  return offset
end

local function heuristic(buf, pinfo, tree)
  if buf:len() < 10 then return false end
  if buf(0, 1):uint() ~= 0xFF or buf(9, 1):uint() % 2 ~= 1 then return false end
  pinfo.conversation = zmtp
  zmtp.dissector(buf, pinfo, tree)
  return true
end

zmtp:register_heuristic("tcp", heuristic)

function zmtp.prefs_changed()
  DissectorTable.get("tcp.port"):add(zmtp.prefs.ports, zmtp)
end
