-- SP over TCP (nanomsg and nng's scalability protocols: sp-tcp-mapping-01 and
-- sp-request-reply-01) for Wireshark and tshark. Shipped with zmq-sp-gateway; install by
-- copying this one file to your personal Lua plugins folder (Wireshark: Help > About > Folders;
-- e.g. ~/.local/lib/wireshark/plugins/), or load it once:
-- tshark -X lua_script:sp.lua -r capture.pcapng
--
-- Finds SP on any TCP port by its 8-byte header (00 'S' 'P' 00, protocol, 00 00), then decodes
-- the stream's messages (a 64-bit big-endian length, then the payload). On req0/rep0 (and
-- surveyor/respondent) streams the backtrace is shown as hops: 32-bit words up to and
-- including the first with its top bit set (the request id); the rest is the body.

local sp = Proto("sp", "Scalability Protocols (nanomsg/nng) over TCP")

local PROTOCOLS = {
  [0x10] = "pair0", [0x11] = "pair1", [0x20] = "pub0", [0x21] = "sub0", [0x30] = "req0",
  [0x31] = "rep0", [0x50] = "push0", [0x51] = "pull0", [0x62] = "surveyor0",
  [0x63] = "respondent0", [0x70] = "bus0",
}
local BACKTRACED = { [0x30] = true, [0x31] = true, [0x62] = true, [0x63] = true }

local f = sp.fields
f.magic = ProtoField.bytes("sp.magic", "Magic")
f.protocol = ProtoField.uint16("sp.protocol", "Protocol", base.HEX, PROTOCOLS)
f.reserved = ProtoField.uint16("sp.reserved", "Reserved", base.HEX)
f.length = ProtoField.uint64("sp.length", "Length")
f.message = ProtoField.none("sp.message", "Message")
f.hop = ProtoField.uint32("sp.hop", "Hop", base.HEX)
f.hops = ProtoField.uint32("sp.hops", "Hops")
f.request_id = ProtoField.uint32("sp.request_id", "Request id", base.HEX)
f.body = ProtoField.bytes("sp.body", "Body")
f.body_text = ProtoField.string("sp.body_text", "Body (text)")

sp.prefs.ports = Pref.range("TCP ports", "", "Also decode these TCP ports as SP", 65535)

local tcp_stream = Field.new("tcp.stream")
local stream_protocol = {}  -- tcp stream -> the SP protocol its headers named

local function printable(tvb)
  local s = tvb:raw()
  if s:match("^[%g ]*$") then return s end
  return nil
end

local function is_header(buf, offset)
  return buf:len() - offset >= 8 and buf(offset, 4):uint() == 0x00535000
end

local function dissect_message(pdu, tree, backtraced)
  local size = pdu:len() - 8
  local t = tree:add(f.message, pdu())
  t:set_text(string.format("SP message, %d byte(s)", size))
  t:add(f.length, pdu(0, 8))
  local pos, hops, words = 8, {}, 0
  if backtraced then
    while pos + 4 <= pdu:len() do
      local w = pdu(pos, 4):uint()
      words = words + 1
      if w >= 0x80000000 then
        t:add(f.request_id, pdu(pos, 4))
        table.insert(hops, string.format("id 0x%08x", w))
        pos = pos + 4
        break
      end
      t:add(f.hop, pdu(pos, 4), w, string.format("Hop %d: 0x%08x (pipe)", words, w))
      table.insert(hops, string.format("0x%08x", w))
      pos = pos + 4
    end
    if words > 0 then t:add(f.hops, pdu(8, 4 * words), words):set_generated() end
  end
  local body = pdu(pos, pdu:len() - pos)
  local text
  if body:len() > 0 then
    t:add(f.body, body)
    text = printable(body:tvb())
    if text then t:add(f.body_text, body, text) end
  end
  local shown = text and ('"' .. text .. '"') or (body:len() > 0 and ("0x" .. body:bytes():tohex():lower()) or "''")
  if backtraced then
    return "backtrace [" .. table.concat(hops, ", ") .. "] body " .. shown
  end
  return "body " .. shown
end

function sp.dissector(buf, pinfo, tree)
  local offset, total = 0, buf:len()
  local stream = tcp_stream() and tcp_stream().value or -1
  local infos = {}
  while offset < total do
    if is_header(buf, offset) then
      local proto = buf(offset + 4, 2):uint()
      local t = tree:add(sp, buf(offset, 8), "SP header")
      t:add(f.magic, buf(offset, 4))
      t:add(f.protocol, buf(offset + 4, 2))
      t:add(f.reserved, buf(offset + 6, 2))
      if BACKTRACED[proto] then stream_protocol[stream] = proto end
      table.insert(infos, "Header " .. (PROTOCOLS[proto] or string.format("0x%04x", proto)))
      offset = offset + 8
    else
      if total - offset < 8 then
        pinfo.desegment_offset = offset
        pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT
        return total
      end
      local size = buf(offset, 8):uint64():tonumber()
      if offset + 8 + size > total then
        pinfo.desegment_offset = offset
        pinfo.desegment_len = offset + 8 + size - total
        return total
      end
      table.insert(infos, dissect_message(buf(offset, 8 + size):tvb(), tree,
                                          stream_protocol[stream] ~= nil))
      offset = offset + 8 + size
    end
  end
  pinfo.cols.protocol = "SP"
  if #infos > 0 then pinfo.cols.info = table.concat(infos, "; ") end
  return offset
end

local function heuristic(buf, pinfo, tree)
  if not is_header(buf, 0) then return false end
  pinfo.conversation = sp
  sp.dissector(buf, pinfo, tree)
  return true
end

sp:register_heuristic("tcp", heuristic)

function sp.prefs_changed()
  DissectorTable.get("tcp.port"):add(sp.prefs.ports, sp)
end
